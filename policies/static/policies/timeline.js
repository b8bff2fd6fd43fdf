// The policy page's schedule timeline: each switch's time (UTC) also in the operator's zone.
(function () {
  "use strict";
  function show() {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
    document.querySelectorAll(".schedule-timeline .operator-zone").forEach(function (el) {
      el.textContent = zone;
    });
    var format = new Intl.DateTimeFormat(undefined, {
      weekday: "short", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", timeZoneName: "short",
    });
    document.querySelectorAll(".schedule-timeline .local-time").forEach(function (el) {
      var at = new Date(el.dataset.utc);
      if (!isNaN(at)) { el.textContent = "(" + format.format(at) + ", " + zone + ")"; }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", show);
  } else {
    show();
  }
})();
