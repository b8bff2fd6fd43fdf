// The policy editor's rule cards: each shows only the fields of its kind, with its help and
// an example (both from the rule-kind registry, through the page's hints); label keys and
// values autocomplete from the inventory. Without JavaScript every field shows. The impact preview is live-preview.js.
"use strict";

(function () {
  const OPERATOR_HELP = {
    In: "In: the label is present and its value is one of the values.",
    NotIn: "NotIn: the label is absent or its value is none of the values.",
    Exists: "Exists: the label is present (no values).",
    DoesNotExist: "DoesNotExist: the label is absent (no values).",
    Gt: "Gt: the label's value is an integer greater than the one value.",
    Lt: "Lt: the label's value is an integer less than the one value.",
    Gte: "Gte: at least the quantity.",
    Lte: "Lte: at most the quantity.",
    Matches: "Matches: the node name matches the glob.",
    NotMatches: "NotMatches: the node name does not match the glob.",
  };

  function readHints() {
    const element = document.getElementById("rule-editor-hints");
    return element ? JSON.parse(element.textContent) : null;
  }

  function fieldWrapper(card, name) {
    const box = card.querySelector(".fieldBox.field-" + name);
    if (box) return box.parentElement;
    return card.querySelector(".form-row.field-" + name);
  }

  function setUpCard(card, group, hints) {
    const kind = card.querySelector('select[name$="-kind"]');
    if (!kind || card.dataset.ruleEditor) return;
    card.dataset.ruleEditor = "1";
    const byKind = group === "filter_rules" ? hints.filter_fields : hints.weight_fields;
    const specific = new Set(Object.values(byKind).flat());
    const help = document.createElement("p");
    help.className = "rule-help";
    kind.closest(".form-row").after(help);
    const operator = card.querySelector('select[name$="-operator"]');

    function update() {
      const wanted = new Set(byKind[kind.value] || []);
      specific.forEach((name) => {
        const wrapper = fieldWrapper(card, name);
        if (!wrapper) return;
        const hasError = wrapper.querySelector(".errorlist");
        wrapper.hidden = !wanted.has(name) && !hasError;
      });
      card.querySelectorAll(".form-row").forEach((row) => {
        const parts = row.querySelectorAll(".form-multiline > div");
        if (parts.length) row.hidden = Array.from(parts).every((part) => part.hidden);
      });
      const texts = [];
      const kindHelp = (hints.help[group] || {})[kind.value];
      if (kindHelp) texts.push(kindHelp);
      if (operator && wanted.has("operator") && OPERATOR_HELP[operator.value]) {
        texts.push(OPERATOR_HELP[operator.value]);
      }
      help.textContent = texts.length ? texts.join(" ") : "Choose a kind to see its fields.";
    }
    kind.addEventListener("change", update);
    if (operator) operator.addEventListener("change", update);
    update();

    const key = card.querySelector('input[name$="-key"]');
    const values = card.querySelector('input[name$="-values"]');
    if (key) key.setAttribute("list", "label-keys");
    if (key && values) {
      const list = document.createElement("datalist");
      list.id = values.id + "-suggestions";
      card.append(list);
      values.setAttribute("list", list.id);
      const refill = () => {
        list.replaceChildren();
        (hints.values[key.value] || []).forEach((value) => {
          const option = document.createElement("option");
          option.value = value;
          list.append(option);
        });
      };
      key.addEventListener("change", refill);
      refill();
    }
  }

  function setUpAll(hints) {
    ["filter_rules", "weight_rules"].forEach((group) => {
      document
        .querySelectorAll("#" + group + "-group .inline-related:not(.empty-form)")
        .forEach((card) => setUpCard(card, group, hints));
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    const hints = readHints();
    if (!hints) return;
    setUpAll(hints);
    document.addEventListener("formset:added", () => setUpAll(hints));
  });
})();
