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
    if (form) {
      form.hidden = false;
      // Kept: no empty box beside "kept for this tab", only the way to forget it.
      for (const el of form.querySelectorAll("label, input, button[type=submit]")) el.hidden = kept;
    }
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
  function showError(form, page, status) {
    // A refused token is forgotten: the forms ask for one again, in the open.
    if (status === 401) {
      sessionStorage.removeItem(KEY);
      refresh();
    }
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
      showError(form, page, response.status);
      return;
    }
    // An estimate or a preview: the server's page replaces this one.
    // This page's followers end with it.
    for (const t of timers) clearInterval(t);
    document.open();
    document.write(page);
    document.close();
    // The new page's content has the focus, not the document's body.
    const main = document.querySelector("main");
    if (main) main.focus();
  });

  refresh();

  // Playback of a session's last page follows it as it grows: every two seconds
  // (while the tab is shown) it asks for the turns past the last one shown and adds
  // them (before an answer still being written, which the turn then replaces).
  // Without script, a reload shows them.
  const list = document.querySelector("ol.turns[data-follow]");
  let busy = false;
  async function follow() {
    if (!list || busy || document.hidden) return;
    busy = true;
    try {
      const response = await fetch(list.dataset.follow + list.dataset.next);
      const next = response.headers.get("x-forktrail-next");
      if (response.status === 200) {
        const pending = list.querySelector(":scope > li.pending");
        if (pending) pending.insertAdjacentHTML("beforebegin", await response.text());
        else list.insertAdjacentHTML("beforeend", await response.text());
        const written = pending && list.querySelector(`:scope > li.turn:not(.pending)#${pending.id}`);
        if (written) {
          // The answer takes the place, and the focus, of what stood for it.
          const had = pending.contains(document.activeElement) || document.activeElement === pending;
          const current = active === pending;
          pending.remove();
          if (current) active = written;
          rove(written && current ? written : currentTurn());
          if (had) written.focus();
        } else rove(currentTurn());
      }
      if (next) list.dataset.next = next;
    } catch (_) {
      // The server is away for a moment: the next tick asks again.
    } finally {
      busy = false;
    }
  }
  const timers = [];
  if (list) timers.push(setInterval(follow, 2000));

  // An answer being written at the session's end: how long it has run, each second,
  // and where it went once written (here: the turn replaces this; a fork: go there).
  const pending = document.querySelector("li.pending[data-job][data-status=running]");
  if (pending) {
    const since = Date.parse(pending.dataset.since || "");
    const elapsed = pending.querySelector(".elapsed");
    const here = decodeURIComponent(location.pathname.split("/").pop());
    const stop = () => clearInterval(tick);
    const tick = setInterval(async () => {
      if (!pending.isConnected) return stop();
      if (document.hidden) return;
      if (elapsed && !isNaN(since)) {
        elapsed.textContent = " (" + Math.max(0, Math.round((Date.now() - since) / 1000)) + " s so far)";
      }
      try {
        const response = await fetch("/jobs/" + encodeURIComponent(pending.dataset.job));
        // Gone (deleted): nothing more to follow; other failures are asked again.
        if (response.status === 404) return stop();
        if (!response.ok) return;
        const job = await response.json();
        if (job.status === "running") return;
        stop();
        pending.dataset.status = job.status;
        if (job.status !== "complete") location.reload();
        else if (job.fork && job.fork !== here) {
          location.assign("/ui/sessions/" + encodeURIComponent(job.fork) + "?turn=" + job.at);
        } else follow();
      } catch (_) {
        // Asked again at the next tick.
      }
    }, 1000);
    timers.push(tick);
  }

  // Keyboard: the turns are one stop (a roving focus). Tab reaches the current turn,
  // j/k (or the arrow keys) move between turns, Tab again reaches that turn's actions.
  // The turn named in the address (#turn-N: where a form landed) is current, and has
  // the focus.
  const turns = document.querySelector("ol.turns");
  // Scrolling code blocks stay reachable (a region that scrolls must be), the rest of
  // a turn that is not the current one is out of the Tab order.
  const FOCUSABLE = "a[href], button, summary, input, select, textarea, [tabindex]";
  const items = () => (turns ? [...turns.querySelectorAll(":scope > li.turn")] : []);
  let active = null;
  function currentTurn() {
    return active && active.isConnected ? active : items()[0] || null;
  }
  function rove(to) {
    if (!to) return;
    active = to;
    for (const li of items()) {
      const on = li === to;
      li.tabIndex = on ? 0 : -1;
      for (const el of li.querySelectorAll(FOCUSABLE)) {
        if (on && el.dataset.roved) {
          el.removeAttribute("tabindex");
          delete el.dataset.roved;
        } else if (!on && !el.hasAttribute("tabindex")) {
          el.tabIndex = -1;
          el.dataset.roved = "1";
        }
      }
    }
  }
  if (turns) {
    const named = location.hash.startsWith("#turn-") && document.getElementById(location.hash.slice(1));
    rove(named && named.parentElement === turns ? named : currentTurn());
    if (named && named.parentElement === turns) named.focus({ preventScroll: true });
    // A fork lands in its new branch's composer: the text box has the focus.
    const box = location.hash === "#composer" && document.getElementById("composer-content");
    if (box) box.focus({ preventScroll: true });
    turns.addEventListener("focusin", (event) => {
      const li = event.target.closest("ol.turns > li.turn");
      if (li && li !== active) rove(li);
    });
    turns.addEventListener("keydown", (event) => {
      if (event.altKey || event.ctrlKey || event.metaKey) return;
      if (event.target.closest("input, textarea, select, [contenteditable]")) return;
      const step = { j: 1, ArrowDown: 1, k: -1, ArrowUp: -1 }[event.key];
      if (!step) return;
      const all = items();
      const at = all.indexOf(currentTurn());
      const to = all[Math.min(all.length - 1, Math.max(0, at + step))];
      if (!to) return;
      event.preventDefault();
      rove(to);
      to.focus();
    });
    // The skip link leads to the turns: straight to the current one.
    const skip = document.querySelector("a.skip");
    if (skip && currentTurn()) {
      skip.textContent = "Skip to the turns";
      skip.addEventListener("click", (event) => {
        event.preventDefault();
        currentTurn().focus();
      });
    }
  }

  // The tree page: the first branch a search found (the server draws it, with the path
  // from the root) is brought into view, inside the drawing's frame too. A link to a
  // box (#drawn-…, as unfolding and folding are) scrolls there without script.
  const hit = document.querySelector("div.drawing .hit");
  if (hit && !location.hash) hit.scrollIntoView({ block: "nearest", inline: "center" });
})();
