// The viewer's only script, inline under the page's nonce: a running run's counts and rows as they land (polling
// the JSON twin, no build step), and labelling (POST /api/runs/<run_id>/labels). Text only: never innerHTML.
(function () {
  "use strict";
  var live = document.body.getAttribute("data-live");

  function refreshListing() {
    var here = document.getElementById("listing");
    var note = document.getElementById("live-note");
    if (!here) { if (note) note.textContent = "The run wrote more rows since this page opened: reload to see them."; return; }
    fetch(location.href).then(function (r) { return r.text(); }).then(function (html) {
      var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("listing");
      if (fresh) here.replaceWith(document.adoptNode(fresh));
    });
  }

  function poll() {
    fetch(live).then(function (r) { return r.json(); }).then(function (s) {
      var changed = false;
      document.querySelectorAll("[data-count]").forEach(function (el) {
        var k = el.getAttribute("data-count");
        if (k in s && el.textContent !== String(s[k])) { el.textContent = s[k]; changed = true; }
      });
      if (changed) refreshListing();
      if (s.status !== "running") { location.reload(); return; }
      setTimeout(poll, 2000);
    }).catch(function () { setTimeout(poll, 5000); });
  }
  if (live) setTimeout(poll, 2000);

  var rater = document.getElementById("rater");
  var api = document.getElementById("label-api");
  var status = document.getElementById("label-status");
  var KEY = "rubricrun.rater";
  function say(text) { if (status) status.textContent = text; }
  if (rater) {
    rater.value = rater.value || localStorage.getItem(KEY) || "";
    rater.addEventListener("change", function () { localStorage.setItem(KEY, rater.value.trim()); });
    var sheet = document.querySelector("[data-then]");
    var params = new URLSearchParams(location.search);
    if (sheet && rater.value && !params.has("rater") && !params.has("i")) {
      params.set("rater", rater.value);
      location.replace(location.pathname + "?" + params.toString());
    }
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest("button[data-met], button[data-score]");
    if (!button || !api) return;
    var box = button.closest("[data-rid]");
    var who = rater ? rater.value.trim() : "";
    if (rater) localStorage.setItem(KEY, who);
    var body = {response_id: box.getAttribute("data-rid"), criterion_id: box.getAttribute("data-cid")};
    if (button.hasAttribute("data-score")) body.score = Number(button.getAttribute("data-score"));
    else body.met = button.getAttribute("data-met") === "true";
    body.rater = who || null;
    say("saving…");
    fetch(api.getAttribute("data-url"), {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (d) { return {ok: r.ok, data: d}; });
    }).then(function (res) {
      if (!res.ok) { say("not saved: " + res.data.error); return; }
      var then = box.getAttribute("data-then");
      if (then) { location.href = then + (who ? "?rater=" + encodeURIComponent(who) : ""); return; }
      var humans = box.querySelector(".humans");
      humans.querySelectorAll(".human").forEach(function (h) {
        if (h.getAttribute("data-rater") === who) h.remove();
      });
      var tag = document.createElement("span");
      tag.className = "human";
      tag.setAttribute("data-rater", who);
      tag.textContent = (who || "unnamed") + ": " + ("score" in body ? "score " + body.score : body.met ? "met" : "not met");
      humans.appendChild(tag);
      say("saved to labels.jsonl");
    }).catch(function () { say("not saved: the viewer did not answer"); });
  });
})();
