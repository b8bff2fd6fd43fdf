// The impact preview of an editor (policy or label assignment): the form is posted to the
// panel's data-preview-url as it changes (debounced), and the fragment that comes back replaces
// the panel's #draft-preview. Nothing is saved; without JavaScript the panel stays as rendered.
"use strict";

(function () {
  function livePreview(panel) {
    const form = panel.closest("form");
    if (!form || !window.fetch) return;
    const token = form.querySelector('input[name="csrfmiddlewaretoken"]');
    let timer = null;
    let sent = 0;
    async function refresh() {
      const number = ++sent;
      const body = new FormData(form);
      body.append("_object_id", panel.dataset.objectId || "");
      const response = await fetch(panel.dataset.previewUrl, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        headers: { "X-CSRFToken": token ? token.value : "" },
      });
      if (!response.ok || number !== sent) return;
      const current = panel.querySelector("#draft-preview");
      const confirm = current && current.querySelector(".draft-confirm");
      const holder = document.createElement("div");
      holder.innerHTML = await response.text();
      const fresh = holder.querySelector("#draft-preview");
      if (!fresh) return;
      // Keep the "Save anyway" box of a held save while the warnings are still there.
      const warnings = fresh.querySelector(".draft-warnings");
      if (confirm && warnings) warnings.after(confirm);
      current.replaceWith(fresh);
    }
    const schedule = (event) => {
      if (event.target.name === "confirm_warnings") return;
      clearTimeout(timer);
      timer = setTimeout(() => refresh().catch(() => {}), 400);
    };
    form.addEventListener("input", schedule);
    form.addEventListener("change", schedule);
    // An existing policy: show what it does now, before any edit.
    if (panel.dataset.objectId && !panel.querySelector(".draft-clusters")) {
      refresh().catch(() => {});
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const panel = document.querySelector(".draft-panel[data-preview-url]");
    if (panel) livePreview(panel);
  });
})();
