// herdbridge operator page. Plain JS, no build step, nothing from elsewhere.
// Every value from the gateway goes into the page as text (textContent),
// never as HTML: entity names come from other hosts' heartbeats.
"use strict";

const FEED_ROWS = 400;        // rows the feed keeps in the page
const SNAPSHOT_EVERY = 5000;  // the tables also refresh on their own (last seen, heartbeats)
const SNAPSHOT_AFTER = 400;   // after a hop, refresh the tables this much later (debounced)

const $ = (id) => document.getElementById(id);
let boot = "";          // the gateway run the feed follows
let lastSeq = 0;        // the newest hop shown, within boot
let feedShown = 0;
let loggedOut = false;
let snapTimer = 0;
let snapBusy = false;
let probe = 0;          // the timer looking for a new session while logged out
let leader = false;     // this tab holds the event stream
const PROBE_EVERY = 2000;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells, cls) {
  const tr = el("tr", undefined, cls);
  for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", c === undefined || c === null || c === "" ? "—" : c));
  return tr;
}
function td(text, cls, title) {
  const c = el("td", text === undefined || text === null || text === "" ? "—" : text, cls);
  if (title) c.title = title;
  return c;
}
function fill(tbody, rows, empty, cols) {
  tbody.replaceChildren(...(rows.length ? rows : [row([el("td", empty)], "empty")]));
  if (!rows.length) tbody.firstChild.firstChild.colSpan = cols;
}
function ago(iso) {
  if (!iso) return "—";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 2) return "now";
  if (s < 90) return s + "s ago";
  if (s < 5400) return Math.round(s / 60) + "m ago";
  if (s < 129600) return Math.round(s / 3600) + "h ago";
  return Math.round(s / 86400) + "d ago";
}
function clock(iso) {
  const d = new Date(iso);
  const p = (n, w) => String(n).padStart(w || 2, "0");
  return p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()) + "." + p(d.getMilliseconds(), 3);
}
function latency(ms) {
  if (ms === undefined || ms === null) return "—";
  if (ms < 1) return ms.toFixed(2) + " ms";
  if (ms < 1000) return ms.toFixed(0) + " ms";
  return (ms / 1000).toFixed(2) + " s";
}
function fromTo(it) {
  const f = it.fromName || it.from || "?";
  const t = it.toName || it.to || "?";
  return f + " → " + t;
}
function yesNo(v) { return v === undefined || v === null ? "—" : (v ? "yes" : "no"); }
function skew(ms) {
  if (ms === undefined || ms === null) return "—";
  const s = ms / 1000;
  return (s > 0 ? "+" : "") + s.toFixed(1) + " s";
}
function shortId(id) { return id ? id.slice(0, 8) : ""; }

// ---- the tables -------------------------------------------------------------

function renderHosts(s) {
  const rows = s.hosts.map((h) => row([
    td(h.host + (h.local ? " (this host)" : "")),
    td(h.key, "mono"),
    // trust both ways and skew come from the trust/skew checks (Peer in
    // opsui/snapshot.go); "—" until the gateway supplies them
    td(h.local ? "self" : yesNo(h.weTrust), h.weTrust === false ? "bad" : "", h.why),
    td(h.local ? "self" : (h.trustsUs || "—"), h.trustsUs === "no" ? "bad" : "", h.why),
    td(h.local ? "0 s" : skew(h.skewMs)),
    td(ago(h.lastHeartbeat), "", h.lastHeartbeat || "no heartbeat heard"),
    td((h.profiles || []).join(", ")),
  ]));
  fill($("hosts").tBodies[0], rows, "no hosts", 7);
  $("hosts-count").textContent = s.hosts.length;
}

function renderEntities(s) {
  const rows = s.entities.map((e) => {
    const name = td(e.name, "", e.gid + (e.groups && e.groups.length ? " · groups: " + e.groups.join(", ") : ""));
    return row([
      name, td(e.role), td(e.host), td(e.status, "st-" + e.status, e.paneId ? "pane " + e.paneId : ""),
      td(e.held, "num"), td(e.paneId ? (e.queued || 0) : "—", "num"), td(e.waiting ? "yes" : "no"),
      td(e.sessions > 0 ? "connected" : ago(e.lastSeen), "", e.lastSeen || ""),
    ]);
  });
  fill($("entities").tBodies[0], rows, "no entities registered", 8);
  $("entities-count").textContent = s.entities.length;
}

function renderDead(s) {
  const rows = s.deadLetters.map((d) => row([
    td(ago(d.at), "", d.at), td(d.reason, "bad"), td(d.kind),
    td(fromTo({ fromName: d.fromName, from: d.from, toName: d.toName, to: d.to })),
    td(d.queue, "mono"), td(d.reportedToSender ? "yes" : "no"), td(shortId(d.msgId), "mono", d.msgId),
  ]));
  fill($("dead").tBodies[0], rows, s.deadError ? "dead-letter log unreadable: " + s.deadError : "none", 7);
  $("dead-count").textContent = s.deadLetters.length;
}

function renderRefused(s) {
  const reasons = Object.keys(s.refused).sort();
  const chips = reasons.map((r) => el("span", r + " " + s.refused[r], "chip"));
  $("refused-totals").replaceChildren(...(chips.length ? chips : [el("span", "nothing refused since the gateway started", "muted small")]));
  let total = 0;
  for (const r of reasons) total += s.refused[r];
  $("refused-count").textContent = total;
  const rows = s.refusals.map((it) => row([
    td(ago(it.at), "", it.at), td(it.status, "bad"), td(it.kind), td(fromTo(it)), td(it.host), td(shortId(it.msgId), "mono", it.msgId),
  ]));
  fill($("refusals").tBodies[0], rows, "none", 6);
}

// renderBroker names the broker node this gateway is connected to (text
// only: the cluster name is the broker's own words).
function renderBroker(s) {
  const el = $("broker"), b = s.broker;
  el.hidden = !b;
  if (!b) return;
  let t = (b.connected ? "broker " : "broker down, last ") + b.node;
  if (b.nodes && b.nodes.length > 1) t += " (of " + b.nodes.length + " nodes)";
  if (b.clusterName) t += " · cluster " + b.clusterName;
  el.textContent = t;
  el.title = (b.nodes || []).join(", ");
  el.dataset.state = b.connected ? "up" : "down";
}

async function snapshot() {
  if (snapBusy || loggedOut) return;
  snapBusy = true;
  try {
    const r = await fetch("/ui/api/snapshot", { cache: "no-store", credentials: "same-origin" });
    if (r.status === 401) { logout(); return; }
    if (!r.ok) return;
    const s = await r.json();
    $("host").textContent = s.host;
    document.title = "herdbridge · " + s.host;
    renderHosts(s); renderEntities(s); renderDead(s); renderRefused(s); renderBroker(s);
    $("updated").textContent = "updated " + clock(s.at);
    document.body.dataset.ready = "1";
  } catch (e) {
    // the gateway is unreachable: the feed's reconnect says so
  } finally {
    snapBusy = false;
  }
}
function snapshotSoon() {
  if (snapTimer) return;
  snapTimer = setTimeout(() => { snapTimer = 0; snapshot(); }, SNAPSHOT_AFTER);
}

// ---- the live feed ----------------------------------------------------------

function matches(tr) {
  const q = $("filter").value.trim().toLowerCase();
  return !q || tr.dataset.text.includes(q);
}
function addRow(tr) {
  const body = $("feed").tBodies[0];
  if (body.firstChild && body.firstChild.classList.contains("empty")) body.replaceChildren();
  tr.hidden = !matches(tr);
  body.insertBefore(tr, body.firstChild);
  while (body.childNodes.length > FEED_ROWS) body.removeChild(body.lastChild);
}
function note(text) {
  const tr = row([el("td", text)], "note");
  tr.firstChild.colSpan = 7;
  tr.dataset.text = "";
  addRow(tr);
}
function onHop(it) {
  if (it.seq <= lastSeq) return; // a replay after a reconnect, or from another tab's feed
  lastSeq = it.seq;
  if ($("pause").checked) return;
  const tr = row([
    td(clock(it.at), "mono", it.at), td(it.hop, "hop-" + it.hop), td(it.kind), td(fromTo(it), "", (it.from || "") + " → " + (it.to || "")),
    td(it.status), td(latency(it.latencyMs), "num"), td(shortId(it.msgId), "mono", "msgId " + it.msgId + (it.traceId ? "\ntraceId " + it.traceId : "")),
  ], "fresh hop");
  tr.dataset.text = [it.hop, it.kind, it.fromName, it.toName, it.from, it.to, it.status, it.msgId, it.traceId].join(" ").toLowerCase();
  addRow(tr);
  feedShown++;
  $("feed-count").textContent = feedShown;
  snapshotSoon();
}
function onHello(h) {
  if (boot && h.boot !== boot) note("the gateway restarted");
  if (h.boot !== boot) lastSeq = 0;
  boot = h.boot;
  setConn("live", "live");
  snapshot();
}
function onMessage(type, data) {
  if (type === "hello") onHello(data);
  else if (type === "hop") onHop(data);
  else if (type === "dropped") note(data.missed + " hops not shown: this page fell behind the gateway's feed");
  else if (type === "logout") logout();
  else if (type === "state") setConn(data.state, data.text);
}
function setConn(state, text) {
  const c = $("conn");
  c.dataset.state = state;
  c.textContent = text;
}
function logout() {
  if (loggedOut) return;
  loggedOut = true;
  setConn("gone", "logged out");
  $("gone").hidden = false;
  if (channel) channel.postMessage({ type: "logout", data: {} });
  probe = setInterval(probeLogin, PROBE_EVERY);
}
// While logged out, look for a new session: `herdbridge ui` opened in
// another tab sets the cookie this tab sends too. Then carry on (the tab
// holding the stream opens it again).
async function probeLogin() {
  try {
    const r = await fetch("/ui/api/snapshot", { cache: "no-store", credentials: "same-origin" });
    if (!r.ok || !loggedOut) return;
  } catch (e) {
    return;
  }
  clearInterval(probe);
  loggedOut = false;
  $("gone").hidden = true;
  setConn("connecting", "connecting…");
  snapshot();
  if (leader) connect();
}

// One tab at a time holds the event stream (a browser opens only a few
// connections per host over HTTP/1.1, and every open tab would hold one);
// it passes what it gets to the other tabs over a BroadcastChannel. When
// that tab closes, its lock goes to another tab, which opens the stream.
let channel = null;
let es = null;
let retry = 1000;

function share(type, data) {
  onMessage(type, data);
  if (channel) channel.postMessage({ type, data });
}
function connect() {
  if (loggedOut) return;
  if (es) es.close();
  const src = new EventSource("/ui/api/events");
  es = src;
  for (const type of ["hello", "hop", "dropped", "logout"]) {
    src.addEventListener(type, (ev) => { retry = 1000; share(type, JSON.parse(ev.data)); });
  }
  src.onerror = () => {
    if (src !== es) return; // replaced meanwhile
    if (src.readyState === EventSource.CONNECTING) { share("state", { state: "reconnecting", text: "reconnecting…" }); return; }
    // closed: the gateway answered but not with a stream (401 after a
    // restart, or too many pages); ask the snapshot why, then retry
    src.close();
    share("state", { state: "reconnecting", text: "reconnecting…" });
    fetch("/ui/api/snapshot", { cache: "no-store", credentials: "same-origin" })
      .then((r) => { if (r.status === 401) logout(); })
      .catch(() => {})
      .finally(() => { if (!loggedOut && src === es) setTimeout(connect, retry); retry = Math.min(retry * 2, 30000); });
  };
}
function start() {
  $("filter").addEventListener("input", () => {
    for (const tr of $("feed").tBodies[0].rows) if (tr.dataset.text !== undefined) tr.hidden = !matches(tr);
  });
  fill($("feed").tBodies[0], [], "waiting for traffic…", 7);
  snapshot();
  setInterval(() => { if (!document.hidden) snapshot(); }, SNAPSHOT_EVERY);
  if ("locks" in navigator && "BroadcastChannel" in window) {
    channel = new BroadcastChannel("herdbridge-operator-feed");
    channel.onmessage = (ev) => onMessage(ev.data.type, ev.data.data);
    setConn("connecting", "waiting for the feed (another tab holds it)");
    navigator.locks.request("herdbridge-operator-feed", () => {
      leader = true;
      connect();
      return new Promise(() => {}); // held until this tab closes
    });
  } else {
    leader = true;
    connect();
  }
}
document.addEventListener("DOMContentLoaded", start);
