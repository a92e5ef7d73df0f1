// The compaction composition of one protocol session: dsh's BasicCompactionEngine (+ ToolResultPruner when the
// policy has one) in the world's cordis Context, beside a scripted `llm` service (the world's model: capacity
// lookup and summary streams) and one agent built with dsh-agent-loop's own ReactLoopAgent class.
// Glue only: the engine, its listeners, the pruner, the transaction and the agent methods are dsh's.
import { streamScript, DEFAULT_SCRIPT } from './summarizer.mjs';
import { plugCommands } from './command.mjs';

const AGENT_OPTIONS = { provider: 'model', model: 'model-summarizer' }; // a new session's AgentOptions provider/model

/** An injected append failure of the outside world (spec 8.3; the model's `_AppendRefused`). */
/** The summary request dsh streamed (spec 8.5) as the protocol answers it: without the session id and the signal,
 * each message its role and content (ids and sources carry ids dsh mints). */
function requestJson(options) {
  const { sessionId, signal, ...rest } = options;
  const copy = JSON.parse(JSON.stringify(rest));
  copy.messages = copy.messages.map((m) => (m === null ? null : { role: m.role, content: m.content }));
  return copy;
}

export class AppendRefused extends Error {}

const FAULT_KEY = (type, data, opts) => {
  if (type === 'compaction/summary') return 'compaction/summary';
  if (type === 'compaction/end') return data && typeof data === 'object' && 'error' in data ? 'error-close' : 'compaction/end';
  if (opts?.surfaceOp?.op === 'replace' && type === 'user/message' && data?.source?.plugin === 'compact') return 'checkpoint';
  if (opts?.surfaceOp?.op === 'replace' && type === 'tool/result') return 'prune-replace';
  return null;
};

export class Composition {
  constructor(world) {
    this.world = world;
    this.policy = {};           // the BasicCompactionConfig keys of the configured policy
    this.prunerConfig = null;   // toolResultPruner, or null (no pruner composed)
    this.window = null;         // contextWindow for every route (null: no capacity)
    this.capacity = null;       // Map "provider\0model" -> window, when configure named a route
    this.queue = [];            // the standing summary queue
    this.agentOptions = { ...AGENT_OPTIONS }; // the agent's AgentOptions provider/model (configure's `agent`)
    this.summarizeHook = 'llm'; // what the engine's summarize() returns (configure's `summarize`)
    this.op = null;             // per-op world state (scripts, faults, controllers, observations)
    this.starts = 0;
    this.appendErrors = new WeakSet();
    this.appendSeqs = new WeakMap();
    this.summarizerErrors = new WeakSet();
    this.warnings = [];
    this.logged = [];           // the op's info and warn lines of the world's logger, as {level, text}
    world.observers.push((event) => { if (event.type === 'compaction/start') this.starts += 1; this.onEvent(event); });
  }

  /** Build the engine, pruner, llm and agent in the world's current ctx (after world.open). */
  async compose() {
    const { mods } = this.world.dsh;
    const { ctx, session } = this.world;
    const composition = this;
    const { Service } = mods.cordis;
    const Basic = mods['dsh-compaction-basic'];

    class ScriptedLlm extends Service {
      constructor(c) { super(c, 'llm'); }
      async resolveModelInfo(provider, model) { return { context: composition.contextFor(provider, model) }; }
      stream(options) { return composition.streamSummary(options); }
    }
    class ScriptedEngine extends Basic.BasicCompactionEngine {
      async summarize(input, agent, signal) {
        let summarized;
        try { summarized = await super.summarize(input, agent, signal); } catch (error) {
          if (!(signal?.aborted && error === signal.reason) && !composition.appendErrors.has(error)) composition.summarizerErrors.add(error);
          throw error;
        }
        // the subclass hook (spec 8.5): `bare` returns the summary and its route only, `raw` its raw output too
        const { summary, provider, model, rawOutput } = summarized;
        if (composition.summarizeHook === 'bare') return { summary, provider, model };
        if (composition.summarizeHook === 'raw') return { summary, provider, model, rawOutput };
        return summarized;
      }
      async compactIfNeeded(agent, trigger, signal) {
        const record = composition.op?.record;
        try {
          const result = await super.compactIfNeeded(agent, trigger, signal);
          if (record) record.push({ result });
          return result;
        } catch (error) {
          if (record) record.push({ error });
          throw error;
        }
      }
      async compactRegion(start, end, agent, signal) {
        const result = await super.compactRegion(start, end, agent, signal);
        composition.op?.regions.push(result);
        return result;
      }
      compactNow(agent, signal, sourceCommandId) {
        const op = composition.op;
        const running = (async () => {
          try {
            const result = await super.compactNow(agent, signal, sourceCommandId);
            if (op) op.maintenance.push({ result });
            return result;
          } catch (error) {
            if (op) op.maintenance.push({ error, aborted: signal.aborted });
            throw error;
          }
        })();
        // the op waits for this handler to settle: dsh-commands' executor stops awaiting it when the caller's
        // signal aborts (withAbort), while the task still writes its close (DIVERGENCES D5)
        if (op) op.handlers.push(running.then(() => undefined, () => undefined));
        return running;
      }
    }
    await ctx.plugin(ScriptedLlm);
    this.EngineClass = ScriptedEngine;
    this.forks = [];
    await this.plugEngine();
    ctx.logger.exporter({ levels: { default: 3 }, export: (message) => {
      if (message.type === 'warn') this.warnings.push(message);
      if (message.type === 'warn' || message.type === 'info') {
        this.logged.push({ level: message.type, text: String(message.args?.[0] ?? message.content ?? message) });
      }
    } });
    ctx.on('session/flush', () => this.flushed());
    this.session = session;
    this.wrapAppend(session);
    this.agent = this.makeAgent(session);
    await plugCommands(this.world);
  }

  /** (Re)plug the pruner and the engine with the configured policy. A reconfigure keeps the engine's per-agent
   * state (the protocol's engine outlives `configure`; only reset/reload start a new one). */
  async plugEngine() {
    const { ctx } = this.world;
    const old = this.engine;
    for (const fork of this.forks) fork.dispose();
    this.forks = [];
    if (this.prunerConfig !== null) {
      const { ToolResultPruner } = this.world.dsh.mods['dsh-compaction-tool-result-pruner'];
      const fork = ctx.plugin(ToolResultPruner, this.prunerConfig);
      await fork;
      this.forks.push(fork);
    }
    const fork = ctx.plugin(this.EngineClass, this.policy);
    await fork;
    this.forks.push(fork);
    this.engine = ctx.get('compaction');
    if (old && old !== this.engine) {
      for (const key of ['warnedPressureConfigTargets', 'overflowRetries', 'overflowAgents']) this.engine[key] = old[key];
    }
  }

  /** dsh-agent-loop's agent, without its inbox and driver (the protocol drives steps itself): an object of
   * ReactLoopAgent's class, so runMaintenance / status are dsh's methods, with dsh-agent's dispatcher and
   * dsh-agent-loop's RuntimeContextProjection (spec 12) over this session. */
  makeAgent(session) {
    const loop = this.world.dsh.mods['dsh-agent-loop'];
    const { agentEvents } = this.world.dsh.mods['dsh-agent'];
    const { ctx } = this.world;
    const agent = Object.create(loop.ReactLoopAgent.prototype);
    Object.assign(agent, { loopCtx: ctx, id: 'surfacecheck', options: { ...this.agentOptions }, session, ctx,
      phase: { kind: 'idle', lastTurn: 0 }, activityDone: Promise.resolve(), inbox: { hasPending: false } });
    agent.dispatch = agentEvents(ctx, agent);
    agent.runtimeContext = new loop.RuntimeContextProjection(ctx, session);
    return agent;
  }

  contextFor(provider, model) {
    const window = this.capacity ? this.capacity.get(`${provider}\u0000${model}`) ?? null : this.window;
    return window === null || window === undefined ? undefined : { contextWindow: window };
  }

  // -- the world during one op -------------------------------------------------------------------------
  /** Run `body(op)` with this op's scripts/faults; returns [value, common] like the reference runtimes. */
  async run(args, scripts, faults, body) {
    const session = this.world.session;
    const before = session.events.length;
    const starts0 = this.starts;
    const fromQueue = scripts === null;
    const caller = new AbortController();
    this.op = { scripts: scripts ?? this.queue, starts0, faults, caller, agent: null, record: [], regions: [], maintenance: [], handlers: [], concurrent: false, requests: [] };
    this.warnings.length = 0;
    this.logged.length = 0;
    let value;
    const { requests } = this.op;
    try {
      value = await body(this.op);
    } finally {
      this.op = null;
    }
    if (fromQueue) this.queue = this.queue.slice(this.starts - starts0);
    return [value, { generation: session.surface.replaceGeneration, appended: session.events.slice(before).map((e) => e.type), requests }];
  }

  scriptNow() {
    const op = this.op;
    const index = this.starts - 1 - op.starts0;
    return index >= 0 && index < op.scripts.length ? op.scripts[index] : DEFAULT_SCRIPT;
  }

  streamSummary(options) {
    const op = this.op;
    if (op) op.requests.push(requestJson(options));
    const script = op ? this.scriptNow() : DEFAULT_SCRIPT;
    return streamScript(script, options, {
      appendConcurrent: (entry) => this.appendConcurrent(entry),
      abort: (which) => {
        if (!op) return;
        const target = which === 'agent' && op.agent ? op.agent : op.caller;
        target.abort();
      },
    });
  }

  /** Another producer appends while the summary runs (a well-behaved one cites what it shadows, spec 1.4). */
  appendConcurrent([type, data, op, sources]) {
    const session = this.world.session;
    const opts = {};
    if (op !== null && op !== undefined) opts.surfaceOp = op;
    if (sources !== undefined) opts.sourceEventSeqs = sources;
    else if (op && typeof op === 'object') {
      const nodes = session.surface.nodes;
      const i = nodes.indexOf(op.start);
      const j = nodes.indexOf(op.end);
      if (i !== -1 && j !== -1) opts.sourceEventSeqs = nodes.slice(i, j + 1);
    }
    this.op.concurrent = true;
    try { session.append(type, data, opts); } finally { this.op.concurrent = false; }
  }

  /** The world's append: refuses what `faults.fail_appends` names; marks dsh's own append refusals. */
  wrapAppend(session) {
    const original = session.append;
    const composition = this;
    session.append = function append(type, data, opts) {
      const op = composition.op;
      const key = op && !op.concurrent ? FAULT_KEY(type, data, opts) : null;
      if (key !== null && op.faults.fail_appends.includes(key)) {
        const error = key === 'prune-replace'
          ? new AppendRefused('tool/result replacement refused (injected fault: prune-replace)')
          : new AppendRefused(`append of ${type} refused (injected fault: ${key})`);
        composition.appendErrors.add(error);
        throw error;
      }
      try {
        return original.call(this, type, data, opts);
      } catch (error) {
        if (error && typeof error === 'object') {
          composition.appendErrors.add(error);
          composition.appendSeqs.set(error, this.seq);
        }
        throw error;
      }
    };
  }

  /** The durability listener of `sessions.flush` (the world's persistence). */
  flushed() {
    const faults = this.op?.faults;
    if (!faults) return;
    if (faults.cancel_during_flush) this.op.caller.abort();
    if (faults.flush_fails) throw new Error('flush failed (injected fault)');
  }

  onEvent(event) {
    // dsh's agent publishes `agent/status` as a cordis event; a logged `agent/status` stands for it (DISAGREES D3).
    if (event.type === 'agent/status' && typeof event.data?.status === 'string' && this.agent) {
      const { agentEvents } = this.world.dsh.mods['dsh-agent'];
      agentEvents(this.world.ctx, this.agent).emit('agent/status', { status: event.data.status });
    }
  }
}

/** The world's composition, created once per adapter process and rebuilt at every world.open. */
export function composition(world) {
  if (world.composition) return world.composition;
  const comp = new Composition(world);
  world.composition = comp;
  const open = world.open.bind(world);
  world.open = async (seed) => {
    if (seed === undefined) comp.resetConfig();
    comp.agent = null;
    comp.engine = null;
    const session = await open(seed);
    comp.starts = 0;
    await comp.compose();
    return session;
  };
  comp.ready = world.session ? comp.compose() : Promise.resolve(); // the world opened before this module loaded
  return comp;
}

Composition.prototype.resetConfig = function resetConfig() {
  this.policy = {};
  this.prunerConfig = null;
  this.window = null;
  this.capacity = null;
  this.queue = [];
  this.agentOptions = { ...AGENT_OPTIONS };
  this.summarizeHook = 'llm';
};
