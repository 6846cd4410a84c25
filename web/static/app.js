// vigil panel: live updates from the event stream, actions in place and
// deadline countdowns. Plain JavaScript, no inline handlers (the CSP
// forbids them); every text from the server goes in as textContent.
"use strict";
(function () {
  var meta = document.querySelector('meta[name="vigil-csrf"]');
  if (!meta) return; // signed out
  var csrf = meta.getAttribute("content");
  var live = document.getElementById("live");
  var badge = document.getElementById("unread");
  var follow = badge ? (badge.getAttribute("data-follow") || "").split(" ").filter(Boolean) : [];
  // The seq through which the badge has counted each recipient followed:
  // a message event at or before it (sent again on a resumption) is in
  // the count already.
  var seen = {};
  if (badge) {
    (badge.getAttribute("data-seen") || "").split(" ").forEach(function (n, i) {
      if (follow[i]) seen[follow[i]] = parseInt(n, 10) || 0;
    });
  }
  // The stream starts after the newest message when the page was built,
  // so that nothing committed meanwhile is missed.
  var after = document.querySelector('meta[name="vigil-after"]');

  // visible spells what would act on how a text reads rather than be
  // read, as the server does in its pages (web/visible.go) and the CLI
  // in its output: a control character other than tab, line feed and
  // carriage return as \x1b, a C1 control as \u009b and a Unicode bidi
  // control (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069),
  // which makes text read in another order than it is written, as
  // \u202e. Every text from the server passes through it.
  var unsafe = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function visible(text) {
    return String(text).replace(unsafe, function (c) {
      var n = c.charCodeAt(0), h = n.toString(16);
      return n < 0x80 ? "\\x" + ("0" + h).slice(-2) : "\\u" + ("000" + h).slice(-4);
    });
  }

  function setText(el, text) { if (el) el.textContent = visible(text); }

  function setState(root, state) {
    var el = root.querySelector('[data-field="state"]');
    if (!el) return;
    el.textContent = visible(state);
    el.className = "state state-" + state;
    if (state !== "pending") {
      root.querySelectorAll("[data-countdown]").forEach(function (t) { t.removeAttribute("data-countdown"); });
      root.querySelectorAll('[data-field="next"]').forEach(function (t) { t.textContent = ""; });
    }
  }

  function setBadge(n) {
    if (!badge) return;
    badge.textContent = String(n);
    badge.classList.toggle("zero", n === 0);
  }

  // Countdowns to deadlines: the clock in this page, nothing asked of
  // the server.
  function fmt(ms) {
    var s = Math.round(Math.abs(ms) / 1000), out = [];
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    if (d) out.push(d + "d");
    if (h) out.push(h + "h");
    if (m && !d) out.push(m + "m");
    if (!d && !h) out.push(s % 60 + "s");
    return out.join(" ");
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-countdown]").forEach(function (t) {
      var left = Date.parse(t.getAttribute("datetime")) - now;
      t.textContent = left > 0 ? "in " + fmt(left) : "passed " + fmt(left) + " ago";
    });
  }
  tick();
  if (document.querySelector("time[data-countdown]")) setInterval(tick, 1000);

  // Places showing a watch: its list row, or the detail page.
  function places(id) {
    var out = [];
    var row = document.getElementById("w-" + id);
    if (row) out.push(row);
    var det = document.getElementById("watch");
    if (det && det.getAttribute("data-watch") === id) out.push(det);
    return out;
  }

  function onEvent(type, ev) {
    var id = ev.watch_id || "";
    // An outcome's message says the watch settled as well: on a
    // reconnection only message events are sent again (after
    // Last-Event-ID), so a settlement missed meanwhile comes as one.
    var settled = type === "watch.settled" ||
      (type === "message.created" && id !== "" && !!ev.state && ev.state !== "pending");
    places(id).forEach(function (el) {
      if (settled) {
        setState(el, ev.state);
        setText(el.querySelector('[data-field="summary"]'), ev.text || "");
        if (el.id === "watch") {
          var out = document.getElementById("outcome") || document.getElementById("why");
          setText(out, ev.text || "");
          ["check-now", "cancel-box"].forEach(function (x) { var b = document.getElementById(x); if (b) b.hidden = true; });
        }
      } else if (type === "watch.progress" || type === "watch.observed") {
        if (ev.text) setText(el.querySelector('[data-field="summary"]'), ev.text);
        if (ev.polls) setText(el.querySelector('[data-field="polls"]'), String(ev.polls));
      }
    });
    if (type === "watch.created" && document.getElementById("watches")) {
      var news = document.getElementById("news");
      if (news) news.hidden = false;
    }
    if (type === "message.created" && badge && follow.indexOf(ev.recipient) >= 0 && !(ev.seq <= (seen[ev.recipient] || 0))) {
      setBadge((parseInt(badge.textContent, 10) || 0) + 1);
    }
    if (type === "watch.settled") setText(live, "Watch " + id + " " + ev.state + ".");
  }

  if (window.EventSource) {
    var es = new EventSource("/ui/events" + (after ? "?after=" + encodeURIComponent(after.getAttribute("content")) : ""));
    ["watch.created", "watch.settled", "watch.progress", "watch.observed", "message.created"].forEach(function (t) {
      es.addEventListener(t, function (m) {
        try { onEvent(t, JSON.parse(m.data)); } catch (e) { /* a malformed event is skipped */ }
      });
    });
    es.onopen = function () { document.body.setAttribute("data-live", "on"); };
    es.onerror = function () { document.body.setAttribute("data-live", "off"); };
    // Leaving the page ends its stream at once: the browser's few
    // connections to the daemon are not held by pages no longer shown.
    window.addEventListener("pagehide", function () { es.close(); });
  }

  function renderProbes(probes) {
    var body = document.querySelector("#probes tbody");
    if (!body) return;
    body.textContent = "";
    probes.forEach(function (p) {
      var tr = document.createElement("tr");
      [p.at.replace("T", " ").replace(/\.\d+/, ""), p.verdict, p.summary || ""].forEach(function (s) {
        var td = document.createElement("td");
        td.textContent = visible(s);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    var none = document.getElementById("no-probes");
    if (none) none.hidden = probes.length > 0;
  }

  // Escape closes an open confirmation unanswered and gives the focus
  // back to what opened it.
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    document.querySelectorAll("details.confirm[open]").forEach(function (box) {
      box.open = false;
      var summary = box.querySelector("summary");
      if (summary) summary.focus();
    });
  });

  // After an action the focus stays where it was if that is still shown
  // (a disabled button loses it while the answer is awaited), or goes to
  // the result line when the control it was on is gone.
  function refocus(el, result) {
    if (el && el !== document.body && el.getClientRects().length > 0 && !el.closest("[hidden], details:not([open]) form")) {
      el.focus();
    } else if (result) {
      result.focus();
    }
  }

  // Actions in place: the form posts with the session's CSRF token and
  // the answer is shown where the button was.
  document.querySelectorAll("form.js-action").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var result = document.getElementById("result");
      var had = document.activeElement;
      var buttons = form.querySelectorAll("button");
      buttons.forEach(function (b) { b.disabled = true; });
      setText(result, "Working…");
      fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin", headers: { "X-Vigil-CSRF": csrf } })
        .then(function (resp) { return resp.json().then(function (j) { return { ok: resp.ok, j: j }; }); })
        .then(function (r) {
          buttons.forEach(function (b) { b.disabled = false; });
          if (!r.ok) { setText(result, r.j.error || "Refused."); refocus(had, result); return; }
          setText(result, r.j.message || "Done.");
          var verb = form.getAttribute("data-verb");
          var box = form.closest("details");
          if (box) box.open = false;
          if (r.j.watch) {
            places(r.j.watch.id).forEach(function (el) {
              setState(el, r.j.watch.state);
              if (r.j.watch.summary) setText(el.querySelector('[data-field="summary"]'), r.j.watch.summary);
              setText(el.querySelector('[data-field="polls"]'), String(r.j.watch.polls));
            });
            if (r.j.watch.state !== "pending") {
              ["check-now", "cancel-box"].forEach(function (x) { var b = document.getElementById(x); if (b) b.hidden = true; });
            }
          }
          if (r.j.probes) renderProbes(r.j.probes);
          if (verb === "delete") {
            document.body.setAttribute("data-deleted", "true");
            document.querySelectorAll(".actions form, .actions details").forEach(function (x) { x.hidden = true; });
          }
          if (verb === "read") {
            document.querySelectorAll("#messages li.unread").forEach(function (li) {
              li.classList.remove("unread");
              var dot = li.querySelector(".dot");
              if (dot) dot.remove();
            });
            setText(document.getElementById("inbox-unread"), "0");
            form.hidden = true;
            if (typeof r.j.unread === "number") setBadge(r.j.unread);
          }
          refocus(had, result);
        })
        .catch(function () {
          buttons.forEach(function (b) { b.disabled = false; });
          setText(result, "The daemon did not answer.");
          refocus(had, result);
        });
    });
  });
})();
