// flows.mjs drives a running herdbridge gateway with the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk): a primary over streamable HTTP
// and a worker over stdio (`herdbridge mcp`), through the main flows.
//
// usage: node flows.mjs HERDBRIDGE_BIN STATE_DIR MCP_URL PRIMARY_TOKEN [PRIMARY_NAME]
//
// MCP_URL and PRIMARY_TOKEN come from `herdbridge register --role primary`.
// Prints "sdk flows ok" and exits 0 on success; prints what went wrong and
// exits 1 otherwise. Run by cmd/herdbridge/sdk_ts_test.go.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [bin, stateDir, url, token, primaryName = 'sdk-primary'] = process.argv.slice(2);
if (!bin || !stateDir || !url || !token) {
  console.error('usage: node flows.mjs HERDBRIDGE_BIN STATE_DIR MCP_URL PRIMARY_TOKEN [PRIMARY_NAME]');
  process.exit(2);
}
const WORKER = 'sdk-worker';
const TOOLS = ['bridge_ask', 'bridge_broadcast', 'bridge_history', 'bridge_interrupt', 'bridge_poll', 'bridge_roster', 'bridge_send', 'bridge_spawn', 'bridge_stop'];
const CALL_TIMEOUT_MS = 20_000; // no single request may take longer
const TOTAL_TIMEOUT_MS = 55_000; // the whole script

// The last exchanges, printed when something fails.
const trail = [];
function note(line) {
  trail.push(line);
  if (trail.length > 30) trail.shift();
}

let failed = false;
function fail(msg) {
  if (failed) return;
  failed = true;
  console.error(`sdk flows FAILED: ${msg}`);
  if (trail.length) {
    console.error('last exchanges:');
    for (const l of trail) console.error('  ' + l);
  }
  process.exit(1);
}

class Mismatch extends Error {}
function check(cond, msg) {
  if (!cond) throw new Mismatch(msg);
}

const watchdog = setTimeout(() => fail(`timed out after ${TOTAL_TIMEOUT_MS / 1000}s`), TOTAL_TIMEOUT_MS);
process.on('unhandledRejection', (err) => fail(`unhandled rejection: ${err?.stack ?? err}`));

const clip = (v) => {
  const s = JSON.stringify(v);
  return s && s.length > 600 ? s.slice(0, 600) + '…' : s;
};

// call runs one tool call and returns its structuredContent. The SDK itself
// validates structuredContent against the tool's outputSchema (cached by
// listTools) and throws if it does not match.
async function call(who, client, name, args, want) {
  let res;
  try {
    res = await client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
  } catch (err) {
    note(`${who} ${name} ${clip(args)} -> THREW ${err?.message ?? err}`);
    throw new Mismatch(`${who}: ${name}(${clip(args)}) threw: ${err?.message ?? err}`);
  }
  const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
  const sc = res.structuredContent;
  note(`${who} ${name} ${clip(args)} -> isError=${!!res.isError} ${clip(sc ?? text)}`);
  check(!res.isError, `${who}: ${name}(${clip(args)}) returned a tool error: ${text}`);
  check(sc && typeof sc === 'object', `${who}: ${name}(${clip(args)}) returned no structuredContent (text: ${text})`);
  if (want !== undefined) {
    check(sc.status === want, `${who}: ${name}(${clip(args)}) status ${JSON.stringify(sc.status)}, want ${JSON.stringify(want)}; result ${clip(sc)}`);
  }
  return sc;
}

// waitPoll long-polls until a message with body arrives; anything else
// arriving meanwhile is a failure.
async function waitPoll(who, client, body) {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const r = await call(who, client, 'bridge_poll', { wait_s: 5 });
    check(r.status === 'drained' || r.status === 'empty', `${who}: poll status ${JSON.stringify(r.status)}, want drained or empty`);
    const msgs = r.messages ?? [];
    const m = msgs.find((m) => m.body === body);
    if (m) return m;
    check(msgs.length === 0, `${who}: unexpected messages while waiting for ${JSON.stringify(body)}: ${clip(msgs)}`);
  }
  throw new Mismatch(`${who}: ${JSON.stringify(body)} never arrived`);
}

async function listTools(who, client) {
  const { tools } = await client.listTools(undefined, { timeout: CALL_TIMEOUT_MS });
  const names = tools.map((t) => t.name).sort();
  note(`${who} tools/list -> ${names.join(',')}`);
  check(JSON.stringify(names) === JSON.stringify(TOOLS), `${who}: tools ${names.join(',')}, want ${TOOLS.join(',')}`);
  for (const t of tools) {
    check(t.inputSchema?.type === 'object', `${who}: ${t.name} has no object inputSchema: ${clip(t.inputSchema)}`);
    check(t.outputSchema?.type === 'object', `${who}: ${t.name} has no object outputSchema: ${clip(t.outputSchema)}`);
  }
  // The SDK compiles a validator per outputSchema here and checks every
  // structuredContent against it in callTool. Make sure it did (the field is
  // internal: only checked while it exists).
  const validators = client._cachedToolOutputValidators;
  if (validators instanceof Map) {
    check(validators.size === TOOLS.length, `${who}: the SDK compiled ${validators.size} output schema validators, want ${TOOLS.length}`);
  }
}

async function main() {
  const primary = new Client({ name: 'herdbridge-sdk-ts-primary', version: '1.0.0' });
  const httpTransport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await primary.connect(httpTransport, { timeout: CALL_TIMEOUT_MS });
  note(`primary connected over streamable HTTP, session ${httpTransport.sessionId}, server ${clip(primary.getServerVersion())}`);
  check(httpTransport.sessionId, 'primary: the gateway assigned no Mcp-Session-Id');

  const worker = new Client({ name: 'herdbridge-sdk-ts-worker', version: '1.0.0' });
  const stdioTransport = new StdioClientTransport({
    command: bin,
    args: ['mcp', '--name', WORKER, '--role', 'worker', '--state-dir', stateDir],
    stderr: 'inherit',
  });
  await worker.connect(stdioTransport, { timeout: CALL_TIMEOUT_MS });
  note(`worker connected over stdio (pid ${stdioTransport.pid}), server ${clip(worker.getServerVersion())}`);

  await listTools('primary', primary);
  await listTools('worker', worker);

  // Roster: both are there (list=true: the default answer is a summary, which names only the caller's circle).
  const roster = await call('primary', primary, 'bridge_roster', { list: true });
  const names = (roster.entities ?? []).map((e) => e.name);
  check(names.includes(primaryName) && names.includes(WORKER), `roster lists ${clip(names)}, want ${primaryName} and ${WORKER}`);

  // 1. Brief with an open send; the worker's reply resolves it.
  const send1 = call('primary', primary, 'bridge_send', { target: WORKER, message: 'sdk brief one', wait_s: 10 });
  send1.catch(() => {}); // awaited below; a rejection must not be unhandled meanwhile
  const brief = await waitPoll('worker', worker, 'sdk brief one');
  check(brief.kind === 'SEND', `brief kind ${JSON.stringify(brief.kind)}, want SEND`);
  check(brief.fromName === primaryName, `brief fromName ${JSON.stringify(brief.fromName)}, want ${primaryName}`);
  await call('worker', worker, 'bridge_send', { target: primaryName, message: 'sdk reply one' }, 'confirmed');
  const r1 = await send1;
  check(r1.status === 'replied', `open send status ${JSON.stringify(r1.status)}, want replied; result ${clip(r1)}`);
  check(r1.messages?.length === 1 && r1.messages[0].body === 'sdk reply one', `open send messages ${clip(r1.messages)}, want the one reply "sdk reply one"`);
  check(r1.messages[0].fromName === WORKER, `reply fromName ${JSON.stringify(r1.messages[0].fromName)}, want ${WORKER}`);
  check(r1.msgId, `open send has no msgId: ${clip(r1)}`);

  // 2. Ask mid-turn: the open send returns asked; the answer is delivered;
  // the ask returns answered.
  const send2 = call('primary', primary, 'bridge_send', { target: WORKER, message: 'sdk brief two', wait_s: 10 });
  send2.catch(() => {});
  await waitPoll('worker', worker, 'sdk brief two');
  const ask = call('worker', worker, 'bridge_ask', { question: 'which branch?' });
  ask.catch(() => {});
  const r2 = await send2;
  check(r2.status === 'asked', `open send status ${JSON.stringify(r2.status)}, want asked; result ${clip(r2)}`);
  check(typeof r2.turnId === 'string' && r2.turnId !== '', `asked result has no turnId: ${clip(r2)}`);
  check(r2.messages?.[0]?.body === 'which branch?', `asked result messages ${clip(r2.messages)}, want the question`);
  await call('primary', primary, 'bridge_send', { target: WORKER, message: 'main', turn_id: r2.turnId }, 'delivered');
  const a = await ask;
  check(a.status === 'answered', `ask status ${JSON.stringify(a.status)}, want answered; result ${clip(a)}`);
  check(a.messages?.[0]?.body === 'main', `ask answer ${clip(a.messages)}, want "main"`);
  check(a.turnId === r2.turnId, `ask turnId ${JSON.stringify(a.turnId)}, want ${JSON.stringify(r2.turnId)}`);

  // 3. Ask with nobody waiting: no_waiter at once, and the primary drains
  // the MISSED_ASK it left.
  const t0 = Date.now();
  const missed = await call('worker', worker, 'bridge_ask', { question: 'anyone there?' }, 'no_waiter');
  check(Date.now() - t0 < 5_000, `no_waiter took ${Date.now() - t0} ms`);
  const trace = await call('primary', primary, 'bridge_poll', { target: WORKER }, 'drained');
  const m = trace.messages?.[0];
  check(trace.messages?.length === 1 && m.kind === 'MISSED_ASK' && m.body === 'anyone there?' && m.turnId === missed.turnId,
    `primary drained ${clip(trace.messages)}, want the MISSED_ASK of turn ${missed.turnId}`);

  // 4. Broadcast from the primary reaches the worker, not the sender.
  await call('primary', primary, 'bridge_broadcast', { message: 'sdk all hands' }, 'confirmed');
  const b = await waitPoll('worker', worker, 'sdk all hands');
  check(b.kind === 'BROADCAST', `broadcast kind ${JSON.stringify(b.kind)}, want BROADCAST`);
  check(b.fromName === primaryName, `broadcast fromName ${JSON.stringify(b.fromName)}, want ${primaryName}`);
  await call('primary', primary, 'bridge_poll', {}, 'empty');

  // Clean shutdown: end the HTTP session, stop the stdio server.
  await httpTransport.terminateSession();
  await primary.close();
  await worker.close();
}

try {
  await main();
  clearTimeout(watchdog);
  console.log('sdk flows ok');
  process.exit(0);
} catch (err) {
  fail(err instanceof Mismatch ? err.message : `${err?.stack ?? err}`);
}
