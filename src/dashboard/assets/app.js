// autocode dashboard: renders the server's JSON. Everything that comes from a run is put on the
// page as text (textContent / text nodes, never innerHTML), with control and bidi characters
// made visible first (inert). Decisions are JSON POSTs with the X-Autocode-Dashboard header.
"use strict";

const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

// A string with every control, bidi and invisible character replaced by a visible ⟨U+XXXX⟩.
function inert(value) {
  const text = value === null || value === undefined ? "" : String(value);
  return text.replace(CONTROL, (c) => "\u27e8U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "\u27e9");
}

// An element with attributes (never innerHTML) and children (strings become text nodes).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "onclick") node.addEventListener("click", value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.appendChild(typeof child === "object" ? child : document.createTextNode(inert(child)));
  }
  return node;
}

function pretty(value) {
  return el("pre", {}, JSON.stringify(value, null, 2));
}

async function api(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({ error: "not JSON" }));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function setStatus(text, kind) {
  const status = document.getElementById("status");
  status.textContent = inert(text);
  status.className = "badge " + (kind || "");
}

function age(iso, now) {
  if (!iso) return "-";
  const secs = Math.max(0, Math.round(((now ? new Date(now) : new Date()) - new Date(iso)) / 1000));
  if (secs < 60) return secs + "s";
  if (secs < 3600) return Math.floor(secs / 60) + "m";
  if (secs < 86400) return Math.floor(secs / 3600) + "h";
  return Math.floor(secs / 86400) + "d";
}

function tokens(usage) {
  if (!usage) return "-";
  const sum = ["input_tokens", "output_tokens", "reasoning_tokens"].reduce((s, k) => s + (usage[k] || 0), 0);
  return String(sum);
}

function cost(usage) {
  return usage && typeof usage.cost_usd === "number" ? "$" + usage.cost_usd.toFixed(4) : "-";
}

function routeText(route) {
  if (!route) return "-";
  if (typeof route !== "object") return String(route);
  const parts = [route.provider, route.model, route.effort].filter((p) => p);
  return parts.length ? parts.join(" / ") : JSON.stringify(route);
}

function liveness(row) {
  if (row.driven_by) return el("span", { class: "badge live" }, "driven by pid " + row.driven_by.pid);
  if (row.cut_off) return el("span", { class: "badge stale" }, "cut off: nobody drives it");
  return el("span", { class: "badge" }, "not running");
}

let timer = null;

let source = null;
function stopUpdates() {
  if (timer) clearInterval(timer);
  timer = null;
  if (source) source.close();
  source = null;
}

// ---- the runs page ----------------------------------------------------------------------------

async function showRuns() {
  const main = document.getElementById("main");
  const draw = async () => {
    let data;
    try {
      data = await api("/api/runs");
    } catch (e) {
      setStatus("cannot load the runs: " + e.message, "stale");
      return;
    }
    setStatus("updated " + new Date().toLocaleTimeString(), "live");
    const rows = data.runs.map((r) => {
      const link = el("a", { href: "#/run/" + r.workspace + "/" + encodeURIComponent(r.run_id), class: "run-link" }, r.run_id);
      if (r.refused) {
        return el("tr", { "data-run": r.run_id }, el("td", {}, link), el("td", {}, String(r.workspace)),
          el("td", { colspan: "7" }, el("span", { class: "badge refused" }, "REFUSED"), " ", r.refused));
      }
      const state = r.pause ? el("span", { class: "badge pause" }, r.pause) : el("span", { class: "badge " + (r.phase === "complete" ? "complete" : "") }, r.phase);
      return el("tr", { "data-run": r.run_id },
        el("td", {}, link), el("td", {}, String(r.workspace)), el("td", { class: "phase" }, state),
        el("td", {}, r.stage ? r.stage.dir + " (" + r.stage.role + ", " + routeText(r.stage.route) + ")" : "-"),
        el("td", {}, liveness(r)),
        el("td", {}, age(r.last_event_at || r.updated_at, data.now)),
        el("td", {}, tokens(r.usage)), el("td", {}, cost(r.usage)),
        el("td", {}, r.objective));
    });
    const table = el("table", { id: "runs" },
      el("tr", {}, ["run", "ws", "phase or pause", "stage", "liveness", "last event", "tokens", "cost", "objective"].map((h) => el("th", {}, h))),
      rows);
    const problems = data.problems.map((p) => el("p", { class: "refused" }, "workspace " + p.workspace + ": " + p.error));
    main.replaceChildren(el("div", {}, el("h1", {}, "Runs"), el("p", { class: "muted" }, data.workspaces.join(", ")), problems, table,
      data.runs.length ? null : el("p", {}, "No runs yet.")));
  };
  await draw();
  timer = setInterval(draw, 1500);
}

// ---- one run ----------------------------------------------------------------------------------

function newRequestId() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// Shows a decision's progress in the panel as it is drawn now (the page may redraw meanwhile).
function showDecision(...nodes) {
  const box = document.getElementById("decision-result");
  if (box) box.replaceChildren(...nodes);
}

async function decide(ws, run, view, body, button) {
  if (button) button.disabled = true;
  body.request_id = newRequestId();
  body.revision = view.revision;
  showDecision(el("p", {}, "sending " + body.action + "…"));
  const response = await fetch("/api/ws/" + ws + "/runs/" + encodeURIComponent(run) + "/decide", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Autocode-Dashboard": "1" },
    body: JSON.stringify(body),
  });
  let record = await response.json().catch(() => ({ error: "not JSON" }));
  if (!response.ok) {
    showDecision(el("p", { class: "refused", id: "decision-refused" }, "refused: " + (record.error || response.statusText)));
    if (button) button.disabled = false;
    return;
  }
  while (record.status === "running") {
    showDecision(el("p", { id: "decision-running" }, body.action + ": running `autocode " + record.command.join(" ") + "`"));
    await new Promise((resolve) => setTimeout(resolve, 500));
    record = await api("/api/decisions/" + record.request_id);
  }
  const done = el("div", { id: "decision-done", "data-status": record.status, "data-action": body.action },
    el("p", {}, body.action + ": " + record.status + (record.exit_code !== undefined ? " (exit " + record.exit_code + ")" : "")),
    record.messages ? el("pre", {}, record.messages) : null);
  showDecision(done);
}

function decisionPanel(ws, run, view) {
  const st = view.state;
  const panel = el("div", { class: "decision", id: "decisions" });
  const code = view.pause ? view.pause.code : null;
  const post = (body) => (event) => decide(ws, run, view, body, event.target);
  if (code === "AWAITING_PLAN_APPROVAL" && view.plan_token) {
    const plan = st.plan_revisions[st.plan_revisions.length - 1];
    panel.append(el("h2", {}, "Plan revision " + view.plan_token), pretty(plan ? plan.plan : null),
      el("button", { id: "approve-plan", onclick: post({ action: "approve_plan", plan_token: view.plan_token }) }, "Approve this plan"));
  }
  if (code === "WAITING_FOR_USER") {
    const inputs = st.questions.map((q) => {
      const input = el("input", { type: "text", "data-question": q.id, value: q.proposed_default || "" });
      panel.append(el("p", {}, q.id + ": " + q.question, el("br"), input));
      return input;
    });
    panel.append(el("button", { id: "answer", onclick: (e) => post({ action: "answer", answers: inputs.map((i) => [i.dataset.question, i.value]) })(e) }, "Answer"));
  }
  if (code === "AWAITING_HUMAN_REVIEW") {
    for (const review of view.pending_reviews) {
      const reason = el("input", { type: "text", placeholder: "why (to reject)", class: "reject-reason" });
      panel.append(el("h2", {}, "Criterion " + review.criterion_id), el("pre", { class: "review-text" }, review.shown),
        el("button", { class: "accept-criterion", "data-criterion": review.criterion_id, onclick: post({ action: "accept_criterion", criterion: review.criterion_id }) }, "Accept " + review.criterion_id),
        reason,
        el("button", { class: "reject-criterion", onclick: (e) => post({ action: "reject_criterion", criterion: review.criterion_id, reason: reason.value })(e) }, "Reject"));
    }
  }
  if (code === "AWAITING_TEST_CHANGE_REVIEW") {
    if (view.test_change_review) panel.append(el("pre", { class: "review-text" }, view.test_change_review.shown));
    panel.append(el("button", { id: "accept-test-changes", onclick: post({ action: "accept_test_changes" }) }, "Accept the test changes"));
  }
  if (view.driven_by) {
    panel.append(el("button", { id: "stop", onclick: post({ action: "stop" }) }, "Stop (as Ctrl-C)"));
  } else {
    if (code) panel.append(el("button", { id: "resume", onclick: post({ action: "resume" }) }, "Resume"));
    if (st.pause && st.pause.attempt) {
      panel.append(el("button", { id: "abandon-stage", onclick: post({ action: "abandon_stage" }) }, "Set " + st.pause.attempt + " aside and run its stage again"));
    }
    if (st.phase && st.phase.phase === "complete") {
      panel.append(el("button", { id: "apply", onclick: post({ action: "apply" }) }, "Apply the result"));
    }
    panel.append(el("button", { id: "clean", onclick: post({ action: "clean" }) }, "Clean the run"));
  }
  panel.append(el("div", { id: "decision-result" }));
  return panel;
}

// An attempt's status (`run::state::AttemptStatus`, tagged by `status`) in words.
function outcomeText(status) {
  if (typeof status !== "object" || status === null) return String(status);
  switch (status.status) {
    case "rejected": return "rejected: " + status.reason;
    case "paused": return "paused " + status.code;
    default: return status.status;
  }
}

function stageTable(ws, run, st) {
  const head = el("tr", {}, ["stage", "role", "route", "attempt", "outcome", "duration", "tokens", "cost"].map((h) => el("th", {}, h)));
  const rows = st.attempts.map((a) => {
    const ms = a.finished_at ? new Date(a.finished_at) - new Date(a.started_at) : new Date() - new Date(a.started_at);
    const link = el("a", { href: "#/run/" + ws + "/" + encodeURIComponent(run) + "/stage/" + encodeURIComponent(a.dir), class: "stage-link" }, a.dir);
    return el("tr", {}, el("td", {}, link), el("td", {}, a.role), el("td", {}, routeText(a.route)), el("td", {}, String(a.attempt)),
      el("td", { class: "outcome" }, outcomeText(a.status)),
      el("td", {}, Math.round(ms / 1000) + "s"), el("td", {}, tokens(a.usage)), el("td", {}, cost(a.usage)));
  });
  return el("table", { id: "stages" }, head, rows);
}

function criteriaTable(view) {
  const how = new Map(view.verified.map((v) => [v.milestone + "/" + v.criterion_id, v.how]));
  const rows = view.state.criteria.map((c) => el("tr", {}, el("td", {}, String(c.milestone)), el("td", {}, c.criterion_id),
    el("td", {}, c.verdict), el("td", {}, (c.checks || []).join("; ")), el("td", {}, how.get(c.milestone + "/" + c.criterion_id) || c.detail)));
  return el("table", { id: "criteria" }, el("tr", {}, ["milestone", "criterion", "verdict", "checks", "how verified"].map((h) => el("th", {}, h))), rows);
}

async function showStage(ws, run, stage, target) {
  const data = await api("/api/ws/" + ws + "/runs/" + encodeURIComponent(run) + "/stages/" + encodeURIComponent(stage));
  const record = (name, r) => {
    if (!r) return el("section", {}, el("h2", {}, name), el("p", { class: "muted" }, "none"));
    if (r.refused) return el("section", {}, el("h2", {}, name), el("p", { class: "refused" }, "not shown: " + r.refused));
    return el("section", { "data-record": name }, el("h2", {}, name), pretty(r.verified));
  };
  const validation = data.validation && data.validation.verified;
  const verdict = validation ? (validation.accepted ? "schema: accepted" : "schema: rejected — " + (validation.problems || []).join("; ")) : "schema: no verdict recorded";
  const ledger = (data.ledger || []).slice(0, 200).map((entry) => el("tr", {}, el("td", {}, JSON.stringify(entry))));
  const events = el("pre", { id: "events" });
  const badge = el("span", { class: "badge", id: "stream-state" }, "connecting");
  target.replaceChildren(el("h2", {}, "Stage " + stage), el("p", { id: "schema-verdict" }, verdict),
    el("h2", {}, "Live events ", badge), events,
    record("report", data.report), record("evidence", data.evidence),
    el("section", {}, el("h2", {}, "Ledger (commands the boundary saw)"), el("table", { id: "ledger" }, ledger)),
    record("room", data.room), record("boundary receipt", data.receipt));
  followEvents(ws, run, stage, events, badge);
}

function followEvents(ws, run, stage, pre, badge) {
  if (source) source.close();
  let last = Date.now();
  let lines = 0;
  source = new EventSource("/api/ws/" + ws + "/runs/" + encodeURIComponent(run) + "/stages/" + encodeURIComponent(stage) + "/events");
  const alive = () => { last = Date.now(); badge.textContent = "live"; badge.className = "badge live"; };
  source.addEventListener("line", (e) => {
    alive();
    lines += 1;
    if (lines <= 2000) pre.appendChild(document.createTextNode(inert(e.data) + "\n"));
    pre.dataset.lines = String(lines);
  });
  source.addEventListener("truncated", (e) => { alive(); pre.appendChild(document.createTextNode("[a line of " + e.data + " bytes, not shown]\n")); });
  source.addEventListener("alive", alive);
  source.addEventListener("end", () => { badge.textContent = "stage finished"; badge.className = "badge complete"; source.close(); });
  const check = setInterval(() => {
    if (!source || source.readyState === EventSource.CLOSED) { clearInterval(check); return; }
    if (Date.now() - last > 10000) {
      badge.textContent = "stale since " + new Date(last).toLocaleTimeString();
      badge.className = "badge stale";
    }
  }, 1000);
}

async function showDiff(ws, run, target) {
  const base = "/api/ws/" + ws + "/runs/" + encodeURIComponent(run) + "/diff";
  let data;
  try {
    data = await api(base);
  } catch (e) {
    target.replaceChildren(el("p", { class: "muted" }, "no diff: " + e.message));
    return;
  }
  const shown = el("div", { id: "diff-file" });
  const rows = data.files.map((f) => el("tr", {},
    el("td", {}, el("a", { href: "#", class: "diff-link", onclick: async (e) => {
      e.preventDefault();
      const d = await api(base + "/file?path=" + encodeURIComponent(f.path));
      shown.replaceChildren(el("div", {}, el("h2", {}, f.path), d.binary ? el("p", {}, "binary file") : el("pre", {}, d.text),
        d.truncated ? el("p", { class: "muted" }, "cut at the size cap (" + d.bytes + " bytes in all)") : null));
    } }, f.path)),
    el("td", {}, f.binary ? "binary" : "+" + f.added + " −" + f.deleted)));
  target.replaceChildren(el("p", {}, data.branch + " against " + data.base.slice(0, 12)),
    el("table", { id: "diff-files" }, rows),
    el("h2", {}, "Commits"), el("ul", {}, data.commits.map((c) => el("li", {}, c.commit.slice(0, 12) + " " + c.subject))), shown);
}

async function showRun(ws, run, stage) {
  const main = document.getElementById("main");
  let drawn = null;
  const draw = async () => {
    let view;
    try {
      view = await api("/api/ws/" + ws + "/runs/" + encodeURIComponent(run));
    } catch (e) {
      setStatus("cannot load the run: " + e.message, "stale");
      return;
    }
    const key = view.revision + "|" + (view.driven_by ? view.driven_by.pid : "") + "|" + view.decisions.map((d) => d.status).join(",");
    setStatus("updated " + new Date().toLocaleTimeString(), "live");
    if (key === drawn) return;
    const keepResult = document.getElementById("decision-result");
    const kept = keepResult ? Array.from(keepResult.childNodes) : [];
    drawn = key;
    const st = view.state;
    const phase = view.pause ? el("span", { class: "badge pause", id: "run-phase" }, view.pause.code) : el("span", { class: "badge", id: "run-phase" }, st.phase.phase);
    const pauseBox = view.pause ? el("section", { id: "pause" }, el("h2", {}, "Paused: " + view.pause.code), el("p", {}, view.pause.explanation),
      el("p", {}, view.pause.reason), el("p", {}, "Continue with: ", el("code", { id: "next-step" }, view.pause.next_step))) : null;
    const stageBox = el("div", { id: "stage" });
    const diffBox = el("div", { id: "diff" }, el("button", { id: "show-diff", onclick: () => showDiff(ws, run, diffBox) }, "Show the diff"));
    const replays = view.replays.map((name) => el("li", {}, el("a", { href: "#", onclick: async (e) => {
      e.preventDefault();
      const response = await fetch("/api/ws/" + ws + "/runs/" + encodeURIComponent(run) + "/files?path=" + encodeURIComponent("replays/" + name));
      e.target.parentNode.appendChild(el("pre", {}, await response.text()));
    } }, name)));
    const made = view.decisions.map((d) => el("li", {}, d.made_at + " " + d.action + ": " + d.status));
    main.replaceChildren(el("div", {},
      el("h1", {}, "Run " + st.run_id, " ", phase, " ", liveness(view)),
      el("p", { id: "objective" }, st.objective),
      el("p", { class: "muted" }, "revision " + view.revision),
      pauseBox, decisionPanel(ws, run, view),
      el("h2", {}, "Stages"), stageTable(ws, run, st), stageBox,
      el("h2", {}, "Criteria"), criteriaTable(view),
      el("h2", {}, "Replays"), el("ul", {}, replays),
      el("h2", {}, "Result"), diffBox,
      el("h2", {}, "Decisions made here"), el("ul", { id: "made" }, made)));
    if (kept.length) showDecision(...kept);
    const current = stage || (st.attempts.length ? st.attempts[st.attempts.length - 1].dir : null);
    if (current) showStage(ws, run, current, stageBox).catch((e) => stageBox.replaceChildren(el("p", { class: "refused" }, e.message)));
  };
  await draw();
  timer = setInterval(draw, 1500);
}

// ---- scorecards -------------------------------------------------------------------------------

async function showScorecards() {
  const data = await api("/api/scorecards");
  const pct = (x) => (typeof x === "number" ? (100 * x).toFixed(0) + "%" : "-");
  const cards = data.scorecards.map((card) => {
    if (card.error) return el("section", {}, el("h2", {}, card.dir), el("p", { class: "refused" }, card.error));
    const rows = card.stats.rows.concat([card.stats.total]).map((r) => el("tr", {},
      el("td", {}, r.case), el("td", {}, r.profile), el("td", {}, String(r.runs)), el("td", {}, String(r.passes)),
      el("td", {}, String(r.false_completes)), el("td", {}, String(r.honest_stops)), el("td", {}, String(r.wrong_stops)),
      el("td", {}, String(r.errors)), el("td", {}, pct(r.pass_rate)), el("td", {}, String(r.median_wall_ms ?? "-")),
      el("td", {}, String(r.total_tokens))));
    return el("section", {}, el("h2", {}, card.dir),
      el("p", {}, "false COMPLETE: " + card.stats.false_complete),
      el("table", { class: "scorecard" }, el("tr", {}, ["case", "profile", "runs", "pass", "false complete", "honest stop", "wrong stop", "error", "pass rate", "median wall ms", "tokens"].map((h) => el("th", {}, h))), rows));
  });
  const matrix = data.matrix.error ? el("p", { class: "refused" }, data.matrix.error) :
    el("table", { id: "matrix" }, el("tr", {}, ["engine", "version", "transport", "result", "date", "note"].map((h) => el("th", {}, h))),
      data.matrix.entries.map((e) => el("tr", {}, el("td", {}, e.engine), el("td", {}, e.version), el("td", {}, e.transport),
        el("td", {}, e.result), el("td", {}, e.date), el("td", {}, e.note))));
  document.getElementById("main").replaceChildren(el("div", {}, el("h1", {}, "Scorecards"),
    cards.length ? cards : el("p", { class: "muted" }, "No result folders given (autocode dashboard --scorecard DIR)."),
    el("h2", {}, "Conformance matrix"), matrix));
}

function route() {
  stopUpdates();
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const main = document.getElementById("main");
  const fail = (e) => main.replaceChildren(el("p", { class: "refused" }, e.message));
  if (parts[0] === "scorecards") {
    showScorecards().catch(fail);
  } else if (parts[0] === "run" && parts.length >= 3) {
    showRun(parts[1], parts[2], parts[3] === "stage" ? parts[4] : null).catch(fail);
  } else {
    showRuns().catch(fail);
  }
}

window.addEventListener("hashchange", route);
route();
