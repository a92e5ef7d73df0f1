// The protocol's `bench` op on dsh's own code (docs/protocol.md `bench`; docs/bench.md "Over the protocol").
//
// `{sizes: [...], appends?: n, seed?: n}` → `{ns_per_append: {"<size>": ns}, floor_ns_per_append, appends,
// variant, series: {name: {label, expected, ns_per_append, appends}}, ...}`.
//
// A deterministic dsh-shaped workload (benchmarks/workload.py's event mix, re-generated here: messages,
// tool calls and results, a prune every 3rd turn and a summary every 7th, each replace preceded by its
// shadow price) is appended to a detached dsh `Session` until the surface has S nodes (setup, untimed).
// Then the next batch of events is appended and each surface append is timed alone
// (process.hrtime.bigint) through dsh's code; the figure per size is the median. Series:
//
//   ns_per_append (gated)    `foldSurfaceProjection(claim, event)`, the O(1) shadow-price fold internal to
//                            dsh-token-meter (bench-hooks.mjs exports it); without the hook, the unit below
//   floor_ns_per_append      `tokenMeter.estimateMessage` of the appended message (derived outside the
//                            timed call): the bare pricing
//   projection-unit          the registered `contextPressure` unit's `apply` (TokenMeter's definition,
//                            riding the fold; its state's object spreads are a constant on top)
//   fold-tokens              `foldSurfaceTokens(nodes, event)`, the meter's positional fold: copies the
//                            priced node array on every append
//   meter-measure            `tokenMeter.measure(session)` after each append: the meter's lazy sync
//                            (`session.events` snapshot + `foldSurfaceTokens`) plus measure's
//                            `structuredClone` + `deepFreeze` of the node array
//
// The O(1) series are timed after every size is built: their state at a size is a handful of numbers
// (the claim itself), so each size's batch is re-folded from that size's saved state, PASSES times,
// the sizes interleaved, after an untimed warm-up (V8 compiles dsh's folds over the first thousands of
// calls; a throwaway session is run through WARMUP_SIZES first). The linear series are timed at their
// size, in order, over fewer appends at large sizes (benchmarks/harness.py `linear_appends`).
//
// Every timed call is a call into dsh's installed bundles; the adapter only generates events and keeps
// the clock. Setup of the meter (whose prefix replay is O(S^2) by design) is made linear without touching
// its fold: between syncs, the priced nodes older than the workload's replacement window are moved out
// of the meter's `state.surface` into a side array and concatenated back before timing. Every
// `foldSurfaceTokens` result is still dsh's; the concatenation is checked against dsh's own surface
// (`session.surface.nodes`) and the projection total at every size, so a wrong setup fails loud.
import { register } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ProtocolError } from './refusal.mjs';
import { QUERY } from './bench-hooks.mjs';

const MAX_SIZE = 10 ** 7;
const BATCH_EVENTS = 1200; // ~420 surface appends, with prunes and summaries among them
const EVENTS_PER_APPEND = 2.85;
const TAIL = 512; // meter nodes kept live during setup: far more than the replacement window (4 turns)
const PRUNE_EVERY = 3, SUMMARY_EVERY = 7, RETAINED_TURNS = 3;
const PROVIDER = 'bench', MODEL = 'bench-chat';
const PRUNE_MARKER = '\n\n[... tool result middle pruned ...]\n\n';
const CHECKPOINT_PREAMBLE = 'This is an automatically generated checkpoint condensing an earlier span of the conversation '
  + 'to free up context.\n\n<compacted-summary>';
const WORDS = ['const', 'value', 'compute', 'module', 'export', 'return', 'result', 'ok', 'src/mod.ts', 'read_file',
  'unused', 'review', 'build', 'log', 'line', 'check', 'surface', 'node', 'token', 'price'];

/** benchmarks/harness.py `batch_for` and `linear_appends`. */
const batchFor = (appends) => (appends == null ? BATCH_EVENTS : Math.max(10, Math.round(appends * EVENTS_PER_APPEND)));
const linearAppends = (size) => Math.max(3, Math.min(Math.floor(size / 2), 300, Math.floor(10 ** 6 / size)));

function parseArgs(args) {
  const { sizes, appends, seed = 0 } = args;
  if (!Array.isArray(sizes) || sizes.length === 0) throw new ProtocolError('bad-args', 'bench: sizes must be a non-empty list of surface sizes');
  for (const size of sizes) {
    if (!Number.isInteger(size) || size < 1 || size > MAX_SIZE) throw new ProtocolError('bad-args', `bench: size ${JSON.stringify(size)} is not an integer in 1..${MAX_SIZE}`);
  }
  if (appends != null && (!Number.isInteger(appends) || appends < 1)) throw new ProtocolError('bad-args', `bench: appends ${JSON.stringify(appends)} is not a positive integer`);
  if (!Number.isInteger(seed)) throw new ProtocolError('bad-args', `bench: seed ${JSON.stringify(seed)} is not an integer`);
  return { sizes: [...new Set(sizes)].sort((a, b) => a - b), batch: batchFor(appends), seed };
}

// -- the workload (benchmarks/workload.py, same structure; its own deterministic PRNG) -----------------

function prng(seed) { // mulberry32
  let a = (seed + 0x9e3779b9) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function templates(seed, pool = 8) {
  const rnd = prng(seed);
  const int = (low, high) => low + Math.floor(rnd() * (high - low + 1));
  const text = (low, high) => {
    const words = [];
    const target = int(low, high);
    let length = 0;
    while (length < target) { const w = WORDS[Math.floor(rnd() * WORDS.length)]; words.push(w); length += w.length + 1; }
    return words.join(' ');
  };
  const assistant = (id, body, calls) => ({ role: 'assistant',
    content: [{ type: 'text', text: body }, ...calls.map(([cid, name, args]) => ({ type: 'tool-call', id: cid, name, arguments: args }))],
    source: { kind: 'model', provider: PROVIDER, model: MODEL }, id });
  const result = (callId, body) => ({ source: { kind: 'tool', callId },
    content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: body }], isError: false }],
    role: 'user', id: `result-${callId}` });
  const range = [...Array(pool).keys()];
  const t = { pool };
  t.users = range.map((i) => ({ content: [{ type: 'text', text: text(40, 160) }], source: { kind: 'user' }, role: 'user', id: `user-t${i}` }));
  t.calls = range.map((i) => [['call-1', 'read_file', `{"path":"src/mod${i}.ts"}`], ['call-2', 'grep', `{"pattern":"export","path":"src/mod${i}.ts"}`]]);
  t.callers = range.map((i) => assistant(`assistant-c${i}`, text(20, 80), t.calls[i]));
  t.closers = range.map((i) => assistant(`assistant-t${i}`, text(30, 200), []));
  t.results = range.map((i) => t.calls[i].map(([cid]) => result(cid, text(120, 600))));
  t.pruned = range.map((i) => t.calls[i].map(([cid]) => result(cid, text(30, 60) + PRUNE_MARKER + text(20, 40))));
  t.checkpoints = range.map((i) => ({ content: [{ type: 'text', text: CHECKPOINT_PREAMBLE },
    { type: 'text', text: `## Current Work\n- ${text(60, 240)}\n</compacted-summary>` }],
  source: { kind: 'system' }, role: 'user', id: `checkpoint-t${i}` }));
  return t;
}

/** An endless log, appended to `session` through `Session.append`; yields each committed event.
 * `price` is dsh's estimator (the producers' shadow prices come from it, as dsh's do). */
class Workload {
  constructor(session, seed, price) {
    this.session = session;
    this.t = templates(seed);
    this.price = price;
    this.surfaceSize = 0;
    this.total = 0;
    this.turn = 0;
    this.turns = []; // per recent turn, its current nodes [seq, price, kind]
    this.stream = this.events();
  }

  next() { return this.stream.next().value; }

  commit(type, data, opts) {
    const seq = this.session.seq;
    const event = opts === undefined ? this.session.append(type, data) : this.session.append(type, data, opts);
    if (event.seq !== seq) throw new Error(`bench workload: dsh assigned seq ${event.seq}, expected ${seq}`);
    return event;
  }

  append(type, data, message, nodes, kind, sources) {
    const event = this.commit(type, data, sources ? { surfaceOp: 'append', sourceEventSeqs: sources } : { surfaceOp: 'append' });
    const price = this.price(message);
    nodes.push([event.seq, price, kind]);
    this.surfaceSize += 1;
    this.total += price;
    return event;
  }

  replace(type, data, message, span, sources) {
    const event = this.commit(type, data, { surfaceOp: { op: 'replace', start: span[0][0], end: span.at(-1)[0] }, sourceEventSeqs: sources });
    const price = this.price(message);
    this.surfaceSize += 1 - span.length;
    this.total += price - span.reduce((sum, node) => sum + node[1], 0);
    return [event, [event.seq, price, 'replacement']];
  }

  * events() {
    const t = this.t;
    yield this.commit('request/header', { header: { config: { provider: PROVIDER, model: MODEL }, system: 'You are a coding agent.' }, reason: 'initial' });
    for (;;) {
      const k = ++this.turn;
      const i = k % t.pool;
      yield this.commit('turn/start', { turn: k });
      if (k % PRUNE_EVERY === 0) yield* this.prune(k);
      if (k % SUMMARY_EVERY === 0) yield* this.summary(k);
      const nodes = [];
      this.turns.push(nodes);
      if (this.turns.length > RETAINED_TURNS + 1) this.turns.shift();
      yield this.append('user/message', t.users[i], t.users[i], nodes, 'user');
      yield this.commit('step/start', { turn: k, step: 1 });
      const caller = t.callers[i];
      yield this.append('assistant/message', { turn: k, step: 1, message: caller, usage: { inputTokens: this.total + 40, outputTokens: 30 } }, caller, nodes, 'caller');
      for (const [j, [callId, name, args]] of t.calls[i].entries()) {
        const call = this.commit('tool/call', { turn: k, step: 1, callId, name, arguments: args });
        yield call;
        const result = t.results[i][j];
        yield this.append('tool/result', { turn: k, step: 1, message: result }, result, nodes, `result-${j}`, [call.seq]);
      }
      yield this.commit('step/end', { turn: k, step: 1 });
      yield this.commit('step/start', { turn: k, step: 2 });
      const closer = t.closers[i];
      yield this.append('assistant/message', { turn: k, step: 2, message: closer, usage: { inputTokens: this.total + 40, outputTokens: 50 } }, closer, nodes, 'closer');
      yield this.commit('step/end', { turn: k, step: 2 });
      yield this.commit('turn/end', { turn: k, reason: { kind: 'completed' } });
    }
  }

  /** Spec 6: prune the first tool result of the turn before last (compaction/prune + adjacent replace). */
  * prune(k) {
    if (this.turns.length < 2) return;
    const nodes = this.turns.at(-2);
    const index = nodes.findIndex((node) => node[2] === 'result-0');
    if (index === -1) return;
    const node = nodes[index];
    const turn = k - 2;
    const pruned = this.t.pruned[turn % this.t.pool][0];
    yield this.commit('compaction/prune', { shadowedRange: { start: node[0], end: node[0] }, shadowedSeqs: [node[0]], shadowedTokenCount: node[1] });
    const [event, fresh] = this.replace('tool/result', { turn, step: 1, message: pruned }, pruned, [node], [node[0]]);
    nodes[index] = fresh;
    yield event;
  }

  /** Spec 8: summarize the oldest retained turn into one checkpoint (the summary arms, the checkpoint consumes). */
  * summary(k) {
    if (this.turns.length < RETAINED_TURNS) return;
    const nodes = this.turns.at(-RETAINED_TURNS);
    if (nodes.length < 2) return;
    const compactionId = `compaction-${this.session.seq}`;
    const start = this.commit('compaction/start', { compactionId, turn: k });
    yield start;
    const checkpoint = this.t.checkpoints[k % this.t.pool];
    const shadowed = nodes.map((node) => node[0]);
    const summary = this.commit('compaction/summary', { compactionId, summary: checkpoint.content.slice(1),
      rawOutput: checkpoint.content.slice(1), llmStreamCall: true, shadowedRange: { start: shadowed[0], end: shadowed.at(-1) },
      shadowedSeqs: shadowed, shadowedTokenCount: nodes.reduce((sum, node) => sum + node[1], 0),
      provider: PROVIDER, model: 'bench-summarizer', maxTokens: 512 });
    yield summary;
    const [event, fresh] = this.replace('user/message', checkpoint, checkpoint, [...nodes], [start.seq, summary.seq, ...shadowed]);
    nodes.splice(0, nodes.length, fresh);
    yield event;
    yield this.commit('compaction/end', { compactionId, turn: k });
  }
}

// -- dsh's code ---------------------------------------------------------------------------------------

let rawFolds; // {foldSurfaceProjection, foldSurfaceTokens} | {error}

/** dsh-token-meter's internal folds: from the adapter's own instance if a hook already exports them,
 * else through bench-hooks.mjs on a queried second instance of the same bundle. */
async function loadRawFolds(world) {
  if (rawFolds) return rawFolds;
  const own = world.dsh.mods['dsh-token-meter'];
  if (typeof own.foldSurfaceProjection === 'function' && typeof own.foldSurfaceTokens === 'function') {
    rawFolds = { foldSurfaceProjection: own.foldSurfaceProjection, foldSurfaceTokens: own.foldSurfaceTokens, via: 'adapter instance' };
    return rawFolds;
  }
  try {
    if (typeof register !== 'function') throw new Error(`node ${process.version} has no module.register`);
    register('./bench-hooks.mjs', import.meta.url);
    const url = `${pathToFileURL(join(world.dsh.modulesDir, '@deepseek-ai', 'dsh-token-meter', 'lib', 'index.js')).href}?${QUERY}`;
    const mod = await import(url);
    if (typeof mod.foldSurfaceProjection !== 'function' || typeof mod.foldSurfaceTokens !== 'function') throw new Error('the load hook did not export the folds');
    rawFolds = { foldSurfaceProjection: mod.foldSurfaceProjection, foldSurfaceTokens: mod.foldSurfaceTokens, via: 'bench-hooks.mjs' };
  } catch (err) {
    rawFolds = { error: String(err?.message ?? err) };
  }
  return rawFolds;
}

let collect;
function gc() {
  if (collect === undefined) {
    try { setFlagsFromString('--expose-gc'); collect = runInNewContext('gc'); } catch { collect = null; }
  }
  if (collect) collect();
}

const now = process.hrtime.bigint;
const isAppend = (event) => event.surfaceOp === 'append';

function median(values) {
  if (values.length === 0) return null;
  const sorted = Float64Array.from(values).sort();
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Fold `events` through `step`, timing each surface append alone; stop after `budget` appends. */
function timeAppends(events, budget, step) {
  const times = [];
  for (const event of events) {
    if (times.length >= budget) break;
    if (event.surfaceOp === 'append') {
      const t0 = now();
      step(event);
      const t1 = now();
      times.push(Number(t1 - t0));
    } else {
      step(event);
    }
  }
  return times;
}

const PASSES = Number(process.env.SURFACECHECK_BENCH_PASSES || 5);

/** Time `step(item)` alone for each item. */
function timeEach(items, step) {
  const times = [];
  for (const item of items) {
    const t0 = now();
    step(item);
    const t1 = now();
    times.push(Number(t1 - t0));
  }
  return times;
}

/** One run: a fresh detached session grown through `sizes`; per size the medians of every series. */
function measureSizes({ Session, deriveEventMessage, meter, unit, folds }, sizes, batch, seed) {
  // `ctx.tokenMeter` is cordis's proxy of the service: fetch the method once, so the floor times the
  // estimator and not the proxy's property traps (estimateMessage does not use `this`).
  const estimateMessage = meter.estimateMessage;
  // A detached session: no publication, so the meter folds only when measured (its lazy `_sync`).
  const session = Session.create(`surfacecheck-bench-${seed}`);
  const workload = new Workload(session, seed, estimateMessage);
  const view = { events: session.log }; // the same committed events, without the per-append snapshot copy
  meter._sync(view);
  const state = meter.states.get(view);
  meter.states.set(session, state);

  let unitState = unit.init();
  let claim; // foldSurfaceProjection's own claim, for the raw series
  let rawTotal = 0;
  const foldO1 = (event) => {
    unitState = unit.apply(unitState, event);
    if (!folds.error) {
      const r = folds.foldSurfaceProjection(claim, event);
      claim = r.claim;
      rawTotal += r.deltaTokens;
    }
  };

  const names = ['runtime', 'floor', 'fold-projection', 'fold-tokens', 'meter-measure'];
  const out = Object.fromEntries(names.map((n) => [n, { ns: {}, appends: {} }]));
  const checks = {};
  const setupMs = {};
  const deferred = [];
  const record = (name, size, times) => {
    if (times.length === 0) return;
    out[name].ns[size] = median(times);
    out[name].appends[size] = times.length;
  };
  for (const size of sizes) {
    // -- setup (untimed): grow the surface to `size`; the O(1) folds see every event, the meter catches up.
    const t0 = performance.now();
    const old = state.surface.length > TAIL ? state.surface.slice(0, state.surface.length - TAIL) : [];
    state.surface = state.surface.slice(old.length);
    while (workload.surfaceSize < size || state.consumedEvents < session.log.length) {
      if (workload.surfaceSize < size) foldO1(workload.next());
      meter._sync(view);
      if (state.surface.length > 2 * TAIL) {
        const cut = state.surface.length - TAIL;
        for (let i = 0; i < cut; i++) old.push(state.surface[i]);
        state.surface = state.surface.slice(cut);
      }
    }
    state.surface = old.concat(state.surface);
    const reached = workload.surfaceSize;
    setupMs[reached] = Math.round(performance.now() - t0);
    // -- the setup is dsh's: the meter's nodes are dsh's surface, all totals agree.
    const surface = session.surface.nodes;
    const sameNodes = surface.length === state.surface.length && state.surface.every((node, i) => node.seq === surface[i]);
    const summed = state.surface.reduce((sum, node) => sum + node.tokens, 0);
    const totals = { workload: workload.total, meter: state.surfaceTokens, meter_nodes: summed, projection: unitState.surfaceTokens,
      ...(folds.error ? {} : { fold_projection: rawTotal }) };
    if (!sameNodes || reached !== surface.length || new Set(Object.values(totals)).size !== 1) {
      throw new Error(`bench setup at surface ${reached}: dsh disagrees with itself (meter nodes ${sameNodes ? 'match' : 'differ from'} `
        + `session.surface.nodes of ${surface.length}; totals ${JSON.stringify(totals)})`);
    }
    checks[reached] = { surface_nodes: surface.length, surface_tokens: state.surfaceTokens, log_events: session.log.length };

    // -- phase 1: append the batch; the meter measures after each append (its own sync + clone).
    const cap = Math.min(linearAppends(size), batch);
    const nodesAtStart = state.surface;
    const events = [];
    const meterTimes = [];
    gc();
    for (let n = 0; n < batch; n++) {
      const event = workload.next();
      events.push(event);
      if (isAppend(event) && meterTimes.length < cap) {
        const a = now();
        meter.measure(session);
        const b = now();
        meterTimes.push(Number(b - a));
      }
    }
    // -- the meter's own fold over the same events, from the nodes it held at the start of the batch.
    let tokensTimes = [];
    if (!folds.error) {
      gc();
      let nodes = nodesAtStart;
      tokensTimes = timeAppends(events.filter((e) => e.surfaceOp !== undefined), cap, (event) => { nodes = folds.foldSurfaceTokens(nodes, event).nodes; });
    }
    // -- the O(1) folds: their state at this size is kept with the batch (timed below); then they fold on.
    deferred.push({ reached, events, messages: events.filter(isAppend).map(deriveEventMessage), unitAt: unitState, claimAt: claim, totalAt: rawTotal });
    for (const event of events) foldO1(event);
    for (const [name, times] of [['fold-tokens', tokensTimes], ['meter-measure', meterTimes]]) record(name, reached, times);
  }
  // -- phase 2: the O(1) series. Their state at a size is a handful of numbers (that is the claim): each
  // size's batch is re-folded from that size's state, the sizes interleaved pass by pass so that load from
  // other processes and V8's tiering fall on every size alike. One untimed pass first, then PASSES timed.
  let unitState2, claim2, total2, floorSink = 0;
  const runtimeStep = (event) => { unitState2 = unit.apply(unitState2, event); };
  const foldStep = (event) => {
    const r = folds.foldSurfaceProjection(claim2, event);
    claim2 = r.claim;
    total2 += r.deltaTokens;
  };
  const floorStep = (message) => { floorSink += estimateMessage(message); };
  const samples = deferred.map(() => ({ runtime: [], floor: [], 'fold-projection': [] }));
  for (let pass = 0; pass <= PASSES; pass++) {
    for (let k = 0; k < deferred.length; k++) {
      const index = (k + pass) % deferred.length;
      const d = deferred[index];
      const into = pass === 0 ? { runtime: [], floor: [], 'fold-projection': [] } : samples[index];
      unitState2 = d.unitAt;
      into.runtime.push(...timeAppends(d.events, Infinity, runtimeStep));
      into.floor.push(...timeEach(d.messages, floorStep));
      if (!folds.error) {
        claim2 = d.claimAt;
        total2 = d.totalAt;
        into['fold-projection'].push(...timeAppends(d.events, Infinity, foldStep));
      }
    }
  }
  if (floorSink < 0) throw new Error('unreachable');
  deferred.forEach((d, index) => {
    for (const [name, times] of Object.entries(samples[index])) record(name, d.reached, times);
  });
  return { out, checks, setupMs };
}

const WARMUP_SIZES = (process.env.SURFACECHECK_BENCH_WARMUP || '1000,3000').split(',').map(Number); // V8 tiers dsh's folds up over the first thousands of calls

async function runBench(world, args) {
  const { sizes, batch, seed } = parseArgs(args);
  const started = performance.now();
  const dsh = world.dsh.mods;
  const meter = world.ctx.tokenMeter;
  const reg = world.ctx.sessionProjections.registrations.get('contextPressure');
  if (!meter || !reg) throw new ProtocolError('unsupported', "bench: dsh's token meter or its contextPressure unit is not composed");
  const folds = await loadRawFolds(world);
  const subject = { Session: dsh['dsh-session'].Session, deriveEventMessage: dsh['dsh-session'].deriveEventMessage,
    meter, unit: reg.def, folds };
  measureSizes(subject, WARMUP_SIZES, BATCH_EVENTS, seed + 1); // untimed warm-up on a throwaway session
  const { out, checks, setupMs } = measureSizes(subject, sizes, batch, seed);
  // The gated series (`ns_per_append`) is the projection fold itself; without the load hook, the unit
  // that rides it. The contextPressure unit adds its state's object spreads: O(1), a constant above the fold.
  const raw = !folds.error;
  const primary = raw ? 'fold-projection' : 'runtime';
  const series = {
    ...(raw ? { 'projection-unit': { label: 'dsh contextPressure unit apply', expected: 'constant', from: 'runtime' } } : {}),
    'fold-tokens': { label: "dsh foldSurfaceTokens (meter's fold)", expected: 'linear', from: 'fold-tokens' },
    'meter-measure': { label: 'dsh TokenMeter.measure() per append', expected: 'linear', from: 'meter-measure' },
  };
  for (const [name, s] of Object.entries(series)) {
    s.ns_per_append = out[s.from].ns;
    s.appends = out[s.from].appends;
    delete s.from;
    if (Object.keys(s.ns_per_append).length === 0) delete series[name];
  }
  return {
    ns_per_append: out[primary].ns,
    floor_ns_per_append: out.floor.ns,
    appends: out[primary].appends,
    variant: raw ? 'dsh foldSurfaceProjection' : 'dsh contextPressure unit apply, rides foldSurfaceProjection',
    series,
    ...(raw ? { raw_folds_via: folds.via } : { unavailable: { 'fold-projection': folds.error, 'fold-tokens': folds.error } }),
    checks,
    setup_ms: setupMs,
    seconds: Math.round(performance.now() - started) / 1000,
    node: process.version,
    seed,
  };
}

export function ops(world) {
  return { bench: (args) => runBench(world, args) };
}
