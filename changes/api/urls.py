"""Routes under /api/v1/: proposals."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter

from changes.api.views import ApprovalRuleViewSet, ProposalViewSet

router = SimpleRouter()
router.register("proposals", ProposalViewSet, basename="proposal")
router.register("approval-rules", ApprovalRuleViewSet, basename="approvalrule")

urlpatterns = [*router.urls]
