// forktrail's one script. Every form works without it (the token is then typed into
// the form). With it, the write token is typed once, kept in this tab's session
// storage (never a cookie) and sent as an Authorization header.
"use strict";
(function () {
  const KEY = "forktrail-token";
  const token = () => sessionStorage.getItem(KEY) || "";

  function refresh() {
    const kept = token() !== "";
    for (const el of document.querySelectorAll(".token-field")) el.hidden = kept;
    const form = document.getElementById("token-form");
    if (form) form.hidden = false;
    const status = document.getElementById("token-status");
    if (status) status.textContent = kept ? "kept for this tab" : "";
    const forget = document.getElementById("token-forget");
    if (forget) forget.hidden = !kept;
  }

  // A wrong token can be forgotten; the forms then ask for one again.
  const forget = document.getElementById("token-forget");
  if (forget) {
    forget.addEventListener("click", () => {
      sessionStorage.removeItem(KEY);
      refresh();
    });
  }

  // An error stays with its form: the message goes above its buttons, what was typed
  // stays, and the page (and its URL) stay what they were.
  function showError(form, page) {
    const doc = new DOMParser().parseFromString(page, "text/html");
    const found = doc.querySelector("p.error");
    const heading = doc.querySelector("h1");
    let note = form.querySelector("p.error[role=alert]");
    if (!note) {
      note = document.createElement("p");
      note.className = "error";
      note.setAttribute("role", "alert");
      note.tabIndex = -1;
      let before = form.querySelector("div.buttons, button[type=submit]");
      while (before && before.parentNode !== form) before = before.parentNode;
      form.insertBefore(note, before);
    }
    const outcome = doc.querySelector("p.outcome");
    note.textContent = (heading ? heading.textContent + ": " : "") +
      (found ? found.textContent : "the server refused it") +
      (outcome ? " " + outcome.textContent : "");
    note.focus();
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (form.id === "token-form") {
      event.preventDefault();
      sessionStorage.setItem(KEY, new FormData(form).get("token") || "");
      form.reset();
      refresh();
      return;
    }
    if ((form.getAttribute("method") || "get").toLowerCase() !== "post") return;
    event.preventDefault();
    const data = new FormData(form, event.submitter);
    const typed = data.get("token");
    if (typed) sessionStorage.setItem(KEY, typed);
    data.delete("token");
    const headers = { "X-Forktrail-Script": "1" };
    if (token()) headers["Authorization"] = "Bearer " + token();
    const response = await fetch(form.action, {
      method: "POST",
      headers,
      body: new URLSearchParams(data),
    });
    // Where the server sends us, #fragment included (a followed redirect loses it).
    const to = response.headers.get("x-forktrail-location");
    if (to) {
      const target = new URL(to, location.href);
      const here = new URL(location.href);
      target.hash = here.hash = "";
      location.assign(to);
      // Only the fragment differs: assign scrolls; the page must show what changed.
      if (target.href === here.href) location.reload();
      return;
    }
    const page = await response.text();
    if (response.status >= 400) {
      showError(form, page);
      return;
    }
    // An estimate or a preview: the server's page replaces this one.
    document.open();
    document.write(page);
    document.close();
  });

  refresh();

  // Playback of a session's last page follows it as it grows: every two seconds
  // (while the tab is shown) it asks for the turns past the last one shown and adds
  // them. Without script, a reload shows them.
  const list = document.querySelector("ol.turns[data-follow]");
  if (list) {
    let busy = false;
    setInterval(async () => {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const response = await fetch(list.dataset.follow + list.dataset.next);
        const next = response.headers.get("x-forktrail-next");
        if (response.status === 200) {
          list.insertAdjacentHTML("beforeend", await response.text());
        }
        if (next) list.dataset.next = next;
      } catch (_) {
        // The server is away for a moment: the next tick asks again.
      } finally {
        busy = false;
      }
    }, 2000);
  }

  // The tree page: the first branch a search found (the server draws it, with the path
  // from the root) is brought into view, inside the drawing's frame too. A link to a
  // box (#drawn-…, as unfolding and folding are) scrolls there without script.
  const hit = document.querySelector("div.drawing .hit");
  if (hit && !location.hash) hit.scrollIntoView({ block: "nearest", inline: "center" });
})();
