"""The REST API's shared machinery: base serializers and viewsets, permissions, errors."""
