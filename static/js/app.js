// Small behaviours htmx does not cover. Everything works without this file, only less smoothly.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function toast(text) {
    var box = document.getElementById("toast");
    if (!box) return;
    box.textContent = text;
    box.hidden = false;
    clearTimeout(box._timer);
    box._timer = setTimeout(function () { box.hidden = true; }, 6000);
  }

  // A failed htmx request (403, 404, 500, network) says so instead of doing nothing.
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    if ([409, 422, 503].indexOf(xhr.status) >= 0) return;  // their message was swapped into the page
    var reasons = {403: "Your role can't do that.", 404: "Not found (it may belong to another team).",
                   409: "Conflict: someone changed this meanwhile.", 500: "Server error; nothing was changed."};
    toast(reasons[xhr.status] || ("Request failed (" + xhr.status + ")."));
  });
  document.addEventListener("htmx:sendError", function () { toast("Can't reach the server."); });

  // Chat: Enter sends, Shift+Enter starts a new line.
  document.addEventListener("keydown", function (event) {
    var field = event.target;
    if (!field.matches || !field.matches("textarea[data-enter-submits]")) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (field.value.trim()) field.form.requestSubmit();
    }
  });

  // Scroll the transcript's last entry into view above the chat box, which is sticky on wide
  // screens and would otherwise cover it (its height varies: a notice, a longer draft).
  function showLatest() {
    var transcript = document.getElementById("transcript");
    var last = transcript && transcript.lastElementChild;
    if (!last) return;
    var composer = document.getElementById("composer");
    var covered = composer && getComputedStyle(composer).position === "sticky" ? composer.offsetHeight : 0;
    last.style.scrollMarginBottom = covered + "px";
    last.scrollIntoView({block: "end"});
  }

  // While the assistant works, show the user's message at once; the reply's swap replaces it.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.detail.elt;
    if (!form || form.id !== "composer") return;
    var text = form.querySelector("textarea").value.trim();
    var transcript = document.getElementById("transcript");
    if (!text || !transcript) return;
    var empty = document.getElementById("transcript-empty");
    if (empty) empty.remove();
    var bubble = document.createElement("article");
    bubble.className = "msg msg-user pending";
    bubble.id = "pending-message";
    var head = document.createElement("header");
    head.className = "msg-head";
    head.innerHTML = '<span class="msg-role">User</span><span class="muted small">sending…</span>';
    var body = document.createElement("div");
    body.className = "msg-body";
    body.textContent = text;
    bubble.append(head, body);
    transcript.append(bubble);
    showLatest();
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    if (!form || form.id !== "composer") return;
    var pending = document.getElementById("pending-message");
    if (event.detail.successful) {
      form.reset();
      showLatest();
    } else if (pending) {
      pending.remove();
    }
    form.querySelector("textarea").focus();
  });

  // After a form comes back with errors (422), take keyboard focus (and the eye) to the first bad field.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!event.detail.xhr || event.detail.xhr.status !== 422) return;
    var invalid = document.querySelector("[aria-invalid=true]");
    if (!invalid) return;
    invalid.focus({preventScroll: true});
    invalid.scrollIntoView({block: "center"});
  });

  // "What the model sees" loads each time it is opened, so it reflects the latest turn.
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.matches || !details.matches("details[data-reload-on-open]") || !details.open) return;
    var body = details.querySelector("[hx-get]");
    if (body && window.htmx) window.htmx.trigger(body, "load-context");
  }, true);

  // The session page opens at its latest message (unless a link points at one), and a tab row
  // wider than the screen shows its active tab.
  // It scrolls once everything is laid out ("load"): at DOMContentLoaded later content (fonts,
  // the gauge) still moved the latest message out of view again.
  window.addEventListener("load", function () {
    if (!location.hash) showLatest();
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".tabs [aria-current=page], .mainnav [aria-current=page]").forEach(function (tab) {
      tab.scrollIntoView({block: "nearest", inline: "nearest"});
    });
  });

  // A new assistant's slug follows its name as it is typed ("Research Bot" → research-bot), until the
  // slug is edited by hand. The server checks the slug either way.
  function slugify(text, max) {
    return text.normalize("NFKD").replace(/[\u0300-\u036f]/g, "").toLowerCase()
      .replace(/[^a-z0-9\s_-]/g, "").trim().replace(/[\s-]+/g, "-").slice(0, max).replace(/-+$/, "");
  }
  document.addEventListener("input", function (event) {
    var field = event.target;
    if (!field.matches) return;
    if (field.matches("[data-slug-from]")) { field.dataset.edited = field.value ? "1" : ""; return; }
    document.querySelectorAll("[data-slug-from]").forEach(function (slug) {
      if (slug.dataset.edited || !field.matches(slug.getAttribute("data-slug-from"))) return;
      slug.value = slugify(field.value, parseInt(slug.getAttribute("maxlength"), 10) || 64);
    });
  });

  // The team switcher submits on change (its button stays for keyboards and no-JS).
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("select[data-autosubmit]")) event.target.form.requestSubmit();
  });

  // API key: select on focus, copy button.
  document.addEventListener("focusin", function (event) {
    if (event.target.matches && event.target.matches("[data-select-on-focus]")) event.target.select();
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var field = document.querySelector(button.getAttribute("data-copy"));
    if (!field) return;
    field.select();
    var done = function () { button.textContent = "Copied"; };
    if (navigator.clipboard) navigator.clipboard.writeText(field.value).then(done, function () { document.execCommand("copy"); done(); });
    else { document.execCommand("copy"); done(); }
  });
})();
