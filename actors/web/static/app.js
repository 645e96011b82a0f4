// The teamctl dashboard: reads GET /api/state, follows GET /api/events (server-sent events)
// and re-reads the state when the journal moves; no polling. Agent-written text (subjects,
// messages, transcripts, tool output) only ever enters the page as text nodes: nothing here
// assigns innerHTML, so a subject like <img src=x onerror=...> shows as the characters it is.
"use strict";

(() => {
  const MAX_EVENTS = 1000; // events kept in the page for the stream and task histories
  const FOLD_CHARS = 400; // longer texts are folded in <details>
  const CSRF_HEADER = "X-Teamctl-CSRF"; // actors/web/auth.py

  const S = {
    state: null,
    csrf: "",
    events: [], // newest last
    selectedTask: null,
    fetching: false,
    dirty: false,
    stopped: false,
    transcriptAgent: "",
    jobShown: null,
    keys: {}, // what each part was last drawn from
  };

  // --- building nodes (text only) ------------------------------------------------------------

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  const $ = (id) => document.getElementById(id);

  function folded(text, summary) {
    const s = text === null || text === undefined ? "" : String(text);
    if (s.length <= FOLD_CHARS && s.split("\n").length <= 8) return el("pre", { class: "output" }, s);
    const head = s.slice(0, 120).split("\n")[0];
    return el(
      "details",
      { class: "fold" },
      el("summary", {}, summary || head + " …", el("span", { class: "muted" }, ` (${s.length} chars)`)),
      el("pre", { class: "output" }, s),
    );
  }

  function clock(ts) {
    if (!ts) return "-";
    const d = new Date(ts * 1000);
    return d.toTimeString().slice(0, 8);
  }

  function money(x) {
    if (typeof x !== "number") return "-";
    return x === 0 ? "$0" : "$" + x.toFixed(x < 1 ? 4 : 2);
  }

  function pill(text, kind) {
    return el("span", { class: `pill ${kind || ""} s-${String(text).replace(/[^a-z_]/gi, "")}` }, text);
  }

  function table(node, headers, rows) {
    clear(node);
    node.appendChild(el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))));
    const body = el("tbody");
    for (const cells of rows) body.appendChild(el("tr", {}, cells.map((c) => el("td", {}, c))));
    if (!rows.length) body.appendChild(el("tr", {}, el("td", { class: "muted", colspan: headers.length }, "none")));
    node.appendChild(body);
  }

  function showError(message) {
    const box = $("error");
    box.hidden = !message;
    box.textContent = message || "";
  }

  // --- talking to the server -----------------------------------------------------------------

  async function api(path, options) {
    const opts = Object.assign({ credentials: "same-origin" }, options || {});
    const response = await fetch(path, opts);
    if (response.status === 401) {
      stop("Not authorised: open the URL that `teamctl web` printed (it carries the token).");
      throw new Error("401");
    }
    return response;
  }

  function stop(message) {
    S.stopped = true;
    if (S.source) S.source.close();
    setConn("offline");
    showError(message);
  }

  async function loadState() {
    if (S.stopped) return;
    if (S.fetching) {
      S.dirty = true; // one more read after this one: events arrived meanwhile
      return;
    }
    S.fetching = true;
    try {
      const response = await api("/api/state");
      if (!response.ok) throw new Error(`GET /api/state: ${response.status}`);
      const state = await response.json();
      S.state = state;
      if (state.csrf) S.csrf = state.csrf;
      render();
      showError("");
    } catch (err) {
      if (!S.stopped) showError(String(err.message || err));
    } finally {
      S.fetching = false;
      if (S.dirty) {
        S.dirty = false;
        loadState();
      }
    }
  }

  function setConn(text) {
    const node = $("conn");
    node.textContent = text;
    node.className = `conn ${text}`;
  }

  // The stream starts after the journal's end unless told where: start a little before it, so
  // the event list and task histories have recent context. A reconnecting EventSource sends
  // Last-Event-ID and resumes exactly where it was.
  function follow(seq) {
    const after = Math.max(0, (seq || 0) - MAX_EVENTS);
    const source = new EventSource(`/api/events?after=${after}`, { withCredentials: true });
    S.source = source;
    source.onopen = () => setConn("live");
    source.onerror = () => setConn(source.readyState === EventSource.CLOSED ? "offline" : "reconnecting");
    const onEvent = (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      if (event && typeof event.seq === "number") {
        const last = S.events.length ? S.events[S.events.length - 1].seq : 0;
        if (event.seq <= last) return; // a resumed stream may repeat what we have
        S.events.push(event);
        if (S.events.length > MAX_EVENTS) S.events.splice(0, S.events.length - MAX_EVENTS);
        S.eventsDirty = true;
      }
      scheduleRefresh();
    };
    source.onmessage = onEvent;
    source.addEventListener("journal", onEvent); // one journal event (id: its seq)
    source.addEventListener("inbox", onEvent); // mail arrived or was read: unread counts moved
  }

  // Many events arrive in a burst (a replay, a busy team): read the state once per frame.
  let refreshQueued = false;
  function scheduleRefresh() {
    if (refreshQueued) return;
    refreshQueued = true;
    setTimeout(() => {
      refreshQueued = false;
      loadState();
      if (S.eventsDirty) {
        S.eventsDirty = false;
        renderEvents();
      }
    }, 50);
  }

  // --- rendering -----------------------------------------------------------------------------

  const COLUMNS = ["in_progress", "ready", "blocked", "completed", "deleted"];
  const COLUMN_TITLE = {
    in_progress: "in progress",
    ready: "ready",
    blocked: "blocked",
    completed: "completed",
    deleted: "deleted",
  };

  function tasks() {
    return (S.state && S.state.tasks) || [];
  }

  function columnOf(task) {
    if (task.column) return task.column;
    if (task.status === "pending") return (task.waiting_on || []).length ? "blocked" : "ready";
    return task.status;
  }

  function render() {
    const st = S.state;
    $("team-name").textContent = st.team || "";
    $("seq").textContent = `journal seq ${st.seq ?? "-"}`;
    document.title = `teamctl · ${st.team || "team"}`;
    renderFilters();
    renderBoard();
    renderApprovals();
    renderMembers();
    renderWork();
    renderTranscriptChoices();
    // The open detail is read again only when its task changed or an event named it.
    if (S.selectedTask && changed("detail", detailSource(S.selectedTask))) renderDetail(S.selectedTask);
  }

  function detailSource(tid) {
    const about = eventsAbout(tid);
    return [tid, tasks().find((t) => t.id === tid) || null, about.length ? about[about.length - 1].seq : 0];
  }

  function setOptions(select, values) {
    if (!changed(`options:${select.id}`, values)) return;
    const current = select.value;
    const keep = select.options[0] && select.options[0].value === "" ? select.options[0] : null;
    clear(select);
    if (keep) select.appendChild(keep);
    for (const v of values) select.appendChild(el("option", { value: v }, v));
    if ([...select.options].some((o) => o.value === current)) select.value = current;
  }

  function renderFilters() {
    const all = tasks();
    setOptions($("filter-status"), [...new Set(all.map(columnOf))].sort());
    setOptions($("filter-owner"), [...new Set(all.map((t) => t.owner).filter(Boolean))].sort());
  }

  function renderBoard() {
    const status = $("filter-status").value;
    const owner = $("filter-owner").value;
    const showDeleted = $("filter-deleted").checked || status === "deleted";
    // Redraw only when something shown changed (keeps focus and scroll on unrelated events).
    const key = JSON.stringify([tasks(), status, owner, showDeleted]);
    if (key === S.boardKey) return;
    S.boardKey = key;
    const board = clear($("board-columns"));
    const byId = new Map(tasks().map((t) => [t.id, t]));
    for (const column of COLUMNS) {
      if (column === "deleted" && !showDeleted) continue;
      if (status && status !== column) continue;
      const cards = tasks().filter((t) => columnOf(t) === column && (!owner || t.owner === owner));
      const col = el(
        "div",
        { class: `column c-${column}`, dataset: { column } },
        el("h2", {}, COLUMN_TITLE[column], el("span", { class: "count" }, String(cards.length))),
      );
      for (const task of cards) col.appendChild(card(task, byId));
      board.appendChild(col);
    }
  }

  function taskLink(tid, byId) {
    const other = byId.get(tid);
    const done = other && other.status === "completed";
    return el(
      "a",
      { href: `#task=${encodeURIComponent(tid)}`, class: done ? "dep done" : "dep", title: other ? other.subject : tid, onclick: (e) => { e.preventDefault(); select(tid); } },
      tid,
    );
  }

  function card(task, byId) {
    const plan = task.plan && task.plan !== "none" ? pill(`plan ${task.plan}`, "plan") : null;
    const deps = (task.blocked_by || []).length
      ? el("div", { class: "deps" }, "after ", (task.blocked_by || []).map((d, i) => [i ? ", " : "", taskLink(d, byId)]))
      : null;
    const blocks = (task.blocks || []).length
      ? el("div", { class: "deps" }, "before ", task.blocks.map((d, i) => [i ? ", " : "", taskLink(d, byId)]))
      : null;
    return el(
      "article",
      {
        class: `card${S.selectedTask === task.id ? " selected" : ""}`,
        tabindex: "0",
        dataset: { task: task.id },
        onclick: () => select(task.id),
        onkeydown: (e) => { if (e.key === "Enter") select(task.id); },
      },
      el("div", { class: "card-head" }, el("span", { class: "tid" }, task.id), plan),
      el("div", { class: "subject" }, task.subject),
      el(
        "div",
        { class: "meta" },
        task.owner ? el("span", { class: "owner" }, "@", task.owner) : el("span", { class: "muted" }, "unowned"),
        task.worktree ? el("span", { class: "wt", title: "worktree" }, "⎇ ", task.worktree) : null,
      ),
      deps,
      blocks,
    );
  }

  function select(tid) {
    S.selectedTask = tid;
    if (tid) changed("detail", detailSource(tid));
    for (const c of document.querySelectorAll(".card")) c.classList.toggle("selected", c.dataset.task === tid);
    renderDetail(tid);
  }

  function planDetail(t) {
    if (t.plan && typeof t.plan === "object") return t.plan; // GET /api/tasks/{id}
    return t.plan_detail || { status: t.plan };
  }

  function eventsAbout(tid) {
    return S.events.filter((e) => e.data && (e.data.task_id === tid || e.data.id === tid));
  }

  async function renderDetail(tid) {
    const aside = $("task-detail");
    const row = tasks().find((t) => t.id === tid);
    if (!row) {
      aside.hidden = true;
      return;
    }
    let detail = null;
    try {
      const response = await api(`/api/tasks/${encodeURIComponent(tid)}`);
      if (response.ok) detail = await response.json();
    } catch {
      /* the row from the state still shows */
    }
    if (S.selectedTask !== tid) return;
    const t = Object.assign({}, row, (detail && (detail.task || detail)) || {});
    clear(aside);
    aside.hidden = false;
    aside.appendChild(
      el("div", { class: "detail-head" },
        el("h2", {}, el("span", { class: "tid" }, t.id), " ", t.subject),
        el("button", { type: "button", class: "close", title: "close", onclick: () => { S.selectedTask = null; aside.hidden = true; select(null); } }, "×")),
    );
    const facts = [
      ["status", pill(t.status)],
      ["owner", t.owner || "-"],
      ["worktree", t.worktree || "-"],
      ["plan", planDetail(t).status || "none"],
      ["reviewer", planDetail(t).reviewer || null],
      ["blocked by", (t.blocked_by || []).join(", ") || "-"],
      ["blocks", (t.blocks || []).join(", ") || "-"],
    ];
    const usage = t.usage || t.cost || null;
    if (usage && typeof usage === "object") facts.push(["cost", `${money(usage.cost_usd)} · ${usage.calls ?? 0} calls`]);
    else if (typeof t.cost_usd === "number") facts.push(["cost", money(t.cost_usd)]);
    if (t.tokens) facts.push(["tokens", String(t.tokens)]);
    aside.appendChild(el("dl", { class: "facts" }, facts.filter(([, v]) => v !== null).map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])));
    if (t.description) aside.appendChild(el("section", {}, el("h3", {}, "Description"), folded(t.description)));
    const plan = planDetail(t);
    if (plan.plan) aside.appendChild(el("section", {}, el("h3", {}, "Plan"), folded(plan.plan)));
    if (plan.feedback) aside.appendChild(el("section", {}, el("h3", {}, "Plan feedback"), folded(plan.feedback)));
    if (t.summary) aside.appendChild(el("section", {}, el("h3", {}, "Summary"), folded(t.summary)));
    const runs = (detail && detail.verifications) || eventsAbout(tid).filter((e) => e.type === "task.verified").map((e) => e.data);
    const last = runs.length ? runs[runs.length - 1] : null;
    const verification = last ? last.output || (last.passed === false ? "failed" : "") : null;
    if (t.verify || verification) {
      aside.appendChild(
        el("section", {},
          el("h3", {}, "Verification ", t.verified === true ? pill("passed", "ok") : t.verified === false ? pill("failed", "bad") : null),
          t.verify ? el("code", {}, t.verify) : null,
          verification ? folded(typeof verification === "string" ? verification : JSON.stringify(verification, null, 2)) : null),
      );
    }
    const history = (detail && (detail.history || detail.events)) || eventsAbout(tid);
    aside.appendChild(
      el("section", {}, el("h3", {}, "History"),
        el("ol", { class: "history" }, history.map((e) => el("li", {},
          el("span", { class: "muted" }, clock(e.ts), " #", e.seq, " "),
          el("b", {}, e.type), " ", e.actor ? el("span", { class: "owner" }, "@", e.actor) : null,
          eventNote(e))))),
    );
  }

  function eventNote(e) {
    const d = e.data || {};
    const bits = [];
    for (const key of ["name", "subject", "summary", "feedback", "reason", "status", "tool", "decision", "command", "title", "line"]) {
      if (d[key] !== undefined && d[key] !== null && d[key] !== "") bits.push(`${key}: ${typeof d[key] === "string" ? d[key] : JSON.stringify(d[key])}`);
    }
    if (d.approve !== undefined) bits.push(d.approve ? "approved" : "rejected");
    if (!bits.length) return null;
    const text = bits.join(" · ");
    return el("span", { class: "note" }, " — ", text.length > 300 ? text.slice(0, 300) + "…" : text);
  }

  // --- approvals -----------------------------------------------------------------------------

  function approvals() {
    return (S.state && S.state.approvals) || [];
  }

  function approvalCard(a) {
    const feedback = el("textarea", { rows: "2", placeholder: "feedback (sent with a rejection)", class: "feedback" });
    const status = el("span", { class: "muted status" });
    const decide = async (decision) => {
      status.textContent = "sending…";
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      try {
        const response = await api(`/api/approvals/${encodeURIComponent(a.request_id)}`, {
          method: "POST",
          headers: { "Content-Type": "application/json", [CSRF_HEADER]: S.csrf },
          body: JSON.stringify({ decision, feedback: feedback.value }),
        });
        if (!response.ok) {
          let why = `${response.status}`;
          try {
            const body = await response.json();
            why = body.error || body.detail || why;
          } catch { /* not JSON */ }
          throw new Error(why);
        }
        status.textContent = decision === "approve" ? "approved" : "rejected";
        loadState();
      } catch (err) {
        status.textContent = `failed: ${err.message || err}`;
        for (const b of box.querySelectorAll("button")) b.disabled = false;
      }
    };
    const box = el(
      "article",
      { class: `approval k-${a.kind}`, dataset: { request: a.request_id } },
      el("div", { class: "approval-head" }, pill(a.kind, "kind"), " ", el("span", { class: "owner" }, "@", a.agent), " ",
        el("span", { class: "tid" }, a.about), " ", el("span", { class: "muted" }, a.request_id)),
      a.subject ? el("div", { class: "subject" }, a.subject) : null,
      a.plan ? folded(a.plan, "plan") : null,
      a.reason ? el("div", { class: "muted" }, a.reason) : null,
      a.input && Object.keys(a.input).length ? folded(typeof a.input === "string" ? a.input : JSON.stringify(a.input, null, 2), "tool input") : null,
      a.status && a.kind === "plan" && a.status !== "submitted" ? el("div", { class: "muted" }, `waiting for the plan (${a.status})`) : null,
      feedback,
      el("div", { class: "buttons" },
        el("button", { type: "button", class: "approve", onclick: () => decide("approve") }, "Approve"),
        el("button", { type: "button", class: "reject", onclick: () => decide("reject") }, "Reject with feedback"),
        status),
    );
    return box;
  }

  function renderApprovals() {
    const list = approvals();
    $("approval-count").textContent = list.length ? String(list.length) : "";
    // Keep what a person is typing: rebuild only when the set of requests changed.
    const key = list.map((a) => `${a.request_id}:${a.status}`).join(",");
    if (key === S.approvalsKey) return;
    S.approvalsKey = key;
    const full = clear($("approvals-list"));
    const strip = clear($("approvals-strip"));
    if (!list.length) full.appendChild(el("p", { class: "muted" }, "Nothing waits for a decision."));
    for (const a of list) {
      full.appendChild(approvalCard(a));
      strip.appendChild(approvalCard(a));
    }
    if (list.length) strip.insertBefore(el("h2", {}, "Waiting for you"), strip.firstChild);
  }

  // --- members, worktrees, jobs, cron, workflows -----------------------------------------------

  const STATE_LABEL = {
    waiting_permission: "waiting for permission",
    waiting_plan_approval: "waiting for plan approval",
  };
  const STATE_REASON = new Set(["crashed", "stalled", "stopped", "stopping"]);

  function memberState(m) {
    const label = (STATE_LABEL[m.status] || m.status) + (m.orphaned ? " (gone)" : "");
    const node = el("span", { class: `pill s-${String(m.status).replace(/[^a-z_]/gi, "")}`, dataset: { state: m.status } }, label);
    if (m.reason) node.title = m.reason;
    const why = m.reason && STATE_REASON.has(m.status) ? el("span", { class: "muted" }, " ", m.reason) : null;
    return [node, why];
  }

  function renderMembers() {
    if (!changed("members", S.state.members)) return;
    const rows = ((S.state && S.state.members) || []).map((m) => [
      el("b", {}, m.name),
      m.role || "-",
      memberState(m),
      m.task_id ? [el("span", { class: "tid" }, m.task_id), " ", m.task_subject || ""] : "-",
      m.worktree || "-",
      String(m.unread ?? 0),
      String(m.tokens ?? 0),
      money(m.cost_usd),
    ]);
    table($("members-table"), ["name", "role", "state", "task", "worktree", "unread", "tokens", "cost"], rows);
  }

  // Redraw a part only when its data changed (keeps focus, scroll and open <details>).
  function changed(part, data) {
    const key = JSON.stringify(data);
    if (S.keys[part] === key) return false;
    S.keys[part] = key;
    return true;
  }

  function renderWork() {
    const st = S.state || {};
    if (S.jobShown) showJob(S.jobShown); // its output may have grown
    if (!changed("work", [st.worktrees, st.jobs, st.crons, st.workflows])) return;
    table($("worktrees-table"), ["name", "branch", "task", "ahead/behind", "merged"], (st.worktrees || []).map((w) => [
      el("b", {}, w.name),
      el("code", {}, w.branch),
      w.task_id ? [el("span", { class: "tid" }, w.task_id), " ", w.task_status || "", w.task_owner ? ` @${w.task_owner}` : ""] : "-",
      w.ahead !== undefined && w.ahead !== null ? `+${w.ahead} / -${w.behind ?? 0}` : "-",
      w.merged ? pill("merged", "ok") : "no",
    ]));
    table($("jobs-table"), ["job", "owner", "command", "status", "exit", "started", ""], (st.jobs || []).map((j) => [
      el("span", { class: "tid" }, j.job_id),
      j.owner,
      el("code", {}, j.command),
      pill(j.gone ? "gone" : j.status),
      j.exit_code === null || j.exit_code === undefined ? "-" : String(j.exit_code),
      clock(j.started_at),
      el("button", { type: "button", class: "small", onclick: () => showJob(j.job_id) }, "output"),
    ]));
    table($("crons-table"), ["cron", "schedule", "owner", "prompt", "next", "fired"], (st.crons || st.cron || []).map((c) => [
      el("span", { class: "tid" }, c.cron_id),
      el("code", {}, c.cron),
      c.owner,
      c.prompt,
      c.next_fire || "-",
      String(c.fired ?? 0),
    ]));
    const flows = clear($("workflows-list"));
    const runs = st.workflows || [];
    if (!runs.length) flows.appendChild(el("p", { class: "muted" }, "none"));
    for (const r of runs) {
      flows.appendChild(el("article", { class: "workflow" },
        el("div", { class: "card-head" }, el("b", {}, r.name), " ", el("span", { class: "tid" }, r.run_id), " ", pill(r.status)),
        el("div", { class: "meta" }, `phase: ${r.phase || "-"} · done ${r.done} · running ${r.running} · cached ${r.cached}`),
        el("ol", { class: "history" }, (r.progress || []).map(([seq, line]) => el("li", {}, el("span", { class: "muted" }, `#${seq} `), line)))));
    }
  }

  async function showJob(jobId) {
    S.jobShown = jobId;
    const out = $("job-output");
    try {
      const response = await api(`/api/jobs/${encodeURIComponent(jobId)}/output`);
      const text = response.ok ? await response.text() : `no output (${response.status})`;
      let shown = text;
      try {
        const body = JSON.parse(text);
        if (body && typeof body.output === "string") shown = body.output;
      } catch { /* plain text */ }
      out.hidden = false;
      out.textContent = `$ job ${jobId}\n${shown}`;
    } catch { /* 401 handled in api() */ }
  }

  // --- events --------------------------------------------------------------------------------

  function renderEvents() {
    const agentSel = $("filter-ev-agent");
    const typeSel = $("filter-ev-type");
    setOptions(agentSel, [...new Set(S.events.map((e) => e.actor).filter(Boolean))].sort());
    setOptions(typeSel, [...new Set(S.events.map((e) => e.type))].sort());
    const agent = agentSel.value;
    const type = typeSel.value;
    const list = clear($("events-list"));
    const shown = S.events.filter((e) => (!agent || e.actor === agent) && (!type || e.type === type)).slice(-300).reverse();
    for (const e of shown) {
      list.appendChild(el("li", { dataset: { type: e.type } },
        el("span", { class: "muted" }, clock(e.ts), " #", e.seq), " ",
        el("b", {}, e.type), " ",
        e.actor ? el("span", { class: "owner" }, "@", e.actor) : null,
        e.data && e.data.task_id ? [" ", el("span", { class: "tid" }, e.data.task_id)] : null,
        eventNote(e)));
    }
    if (!shown.length) list.appendChild(el("li", { class: "muted" }, "no events yet"));
  }

  // --- transcripts ---------------------------------------------------------------------------

  function renderTranscriptChoices() {
    const select = $("transcript-agent");
    const names = ((S.state && S.state.members) || []).filter((m) => m.kind !== "human").map((m) => m.name);
    setOptions(select, names);
    if (!S.transcriptAgent && names.length) S.transcriptAgent = select.value = names[0];
    if (currentTab() === "transcripts") loadTranscript();
  }

  function blockNodes(block) {
    if (typeof block === "string") return folded(block);
    if (!block || typeof block !== "object") return folded(JSON.stringify(block));
    switch (block.type) {
      case "text": {
        const text = block.text || "";
        return text.length <= FOLD_CHARS ? el("div", { class: "prose" }, text) : folded(text);
      }
      case "thinking":
        return el("details", { class: "fold thinking" }, el("summary", {}, "thinking"), el("pre", { class: "output" }, block.thinking || ""));
      case "tool_use":
        return el("div", { class: "tool-use" }, el("b", {}, "→ ", block.name), " ", folded(JSON.stringify(block.input, null, 2), `${block.name} input`));
      case "tool_result": {
        const content = Array.isArray(block.content)
          ? block.content.map((c) => (c && c.type === "text" ? c.text : JSON.stringify(c))).join("\n")
          : block.content;
        return el("div", { class: `tool-result${block.is_error ? " error" : ""}` }, el("b", {}, "← ", block.name || "result", block.is_error ? " (error)" : ""), " ", folded(content, `${block.name || "tool"} result`));
      }
      default:
        return folded(JSON.stringify(block, null, 2), block.type || "block");
    }
  }

  async function loadTranscript() {
    const agent = S.transcriptAgent;
    const box = $("transcript");
    if (!agent) {
      clear(box).appendChild(el("p", { class: "muted" }, "no agents"));
      return;
    }
    let body;
    try {
      const response = await api(`/api/transcripts/${encodeURIComponent(agent)}`);
      body = response.ok ? await response.json() : { error: `${response.status}` };
    } catch {
      return;
    }
    if (agent !== S.transcriptAgent) return;
    clear(box);
    const messages = Array.isArray(body) ? body : body.messages || body.entries || [];
    if (body.error) box.appendChild(el("p", { class: "muted" }, `no transcript (${body.error})`));
    if (!messages.length && !body.error) box.appendChild(el("p", { class: "muted" }, "empty transcript"));
    if (body.truncated) box.appendChild(el("p", { class: "muted" }, `the latest ${messages.length} of ${body.total} messages`));
    for (const m of messages) {
      const content = m.blocks || (Array.isArray(m.content) ? m.content : [m.content ?? m.text ?? m]);
      box.appendChild(el("article", { class: `msg r-${m.role || "entry"}` },
        el("div", { class: "role" }, m.role || m.type || "entry", m.ts ? el("span", { class: "muted" }, " ", clock(m.ts)) : null),
        content.map(blockNodes)));
    }
  }

  // --- tabs and start -------------------------------------------------------------------------

  function currentTab() {
    const name = (location.hash || "#board").slice(1).split("=")[0];
    return ["board", "members", "approvals", "events", "transcripts", "work"].includes(name) ? name : "board";
  }

  function showTab() {
    const tab = currentTab();
    for (const section of document.querySelectorAll("section.tab")) section.hidden = section.id !== `tab-${tab}`;
    for (const link of document.querySelectorAll("#tabs a")) link.classList.toggle("active", link.dataset.tab === tab);
    if (tab === "events") renderEvents();
    if (tab === "transcripts") loadTranscript();
  }

  function start() {
    // The token was in the URL only to set the session cookie: keep it out of the history.
    if (new URLSearchParams(location.search).has("token")) history.replaceState(null, "", location.pathname + location.hash);
    window.addEventListener("hashchange", showTab);
    for (const id of ["filter-status", "filter-owner", "filter-deleted"]) $(id).addEventListener("change", renderBoard);
    for (const id of ["filter-ev-agent", "filter-ev-type"]) $(id).addEventListener("change", renderEvents);
    $("transcript-agent").addEventListener("change", (e) => {
      S.transcriptAgent = e.target.value;
      loadTranscript();
    });
    showTab();
    loadState().then(() => {
      if (!S.stopped) follow(S.state ? S.state.seq : 0);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
