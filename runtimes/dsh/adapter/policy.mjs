// Level `policy` (spec 9-13, 1.5). configure = dsh's resolveConfig + a (re)plugged BasicCompactionEngine /
// ToolResultPruner; pre_step = dsh-agent-loop's RuntimeContextProjection.project then the `agent/pre-step`
// waterfall through the agent's own dispatcher (the engine's pressure listener runs there); request_error = the
// `agent/request-error` waterfall (the engine's overflow listener); manual_compact = dsh-commands'
// CommandRuntime.execute of `/compact` (dsh-command-compact's handler → engine.compactNow); reload = a seeded
// session (Session.create via sessions.create(id, {seed})) in a new composition.
import { ProtocolError, refusal } from './refusal.mjs';
import { composition } from './engine.mjs';
import { failureOf, isAbort, parseFaults, resultJson } from './failures.mjs';
import { parseScripts } from './summarizer.mjs';
import { req } from './compaction.mjs';
import { clock, setClock } from './clock.mjs';
import { commandOps } from './command.mjs';
import { reloadOp } from './reload.mjs';

function parseSections(args) {
  const sections = args.context;
  if (sections === undefined || sections === null) return null;
  if (!Array.isArray(sections) || !sections.every((s) => s && typeof s === 'object' && !Array.isArray(s)
      && Object.keys(s).sort().join() === 'name,text' && typeof s.name === 'string' && typeof s.text === 'string')) {
    throw new ProtocolError('bad-args', 'context is a list of runtime-context sections {name: string, text: string}');
  }
  return sections.map((s) => ({ name: s.name, text: s.text }));
}

function parseMarker(args) {
  const m = args.step;
  if (m === undefined || m === null) return null;
  if (typeof m !== 'object' || Array.isArray(m) || Object.keys(m).sort().join() !== 'step,turn'
      || !Number.isInteger(m.turn) || !Number.isInteger(m.step)) throw new ProtocolError('bad-args', 'step is {turn: integer, step: integer}');
  return { turn: m.turn, step: m.step };
}

function parseClaimed(args) {
  const c = args.claimed;
  if (c === undefined || c === null) return null;
  if (!Array.isArray(c) || !c.every((m) => m && typeof m === 'object' && !Array.isArray(m))) {
    throw new ProtocolError('bad-args', 'claimed is a list of user/message data objects (lossless JSON)');
  }
  return structuredClone(c);
}

/** What the engine's summarize() returns (spec 8.5, the subclass customization hook): `llm` dsh's own
 * summarizeWithLlm result; `bare` a subclass's summary, provider and model; `raw` those and the raw output. */
const SUMMARIZE_HOOKS = ['llm', 'bare', 'raw'];

export function ops(world) {
  const comp = composition(world);
  const { mods } = world.dsh;
  const basic = mods['dsh-compaction-basic'];
  const prunerPkg = mods['dsh-compaction-tool-result-pruner'];
  const { joinContextSections } = mods['dsh-system-prompt'];

  async function configure(args) {
    await comp.ready;
    const raw = req(args, 'policy', 'object', { optional: true, def: {} });
    const { toolResultPruner = null, contextWindow = null, ...config } = raw;
    let resolved;
    try {
      resolved = basic.resolveConfig(config);
    } catch (err) {
      return refusal('CompactionConfigError', 'compaction-config', null, err.message);
    }
    if (toolResultPruner !== null) {
      try {
        // the service's Config schema first, as cordis checks a plugin's config before its constructor (spec 6)
        prunerPkg.resolveConfig(prunerPkg.ToolResultPruner.Config(toolResultPruner));
      } catch (err) {
        return refusal('PrunerConfigError', 'pruner-config', null, err.message);
      }
    }
    let window = contextWindow;
    if ('context_window' in args) {
      if (args.context_window !== null && !Number.isInteger(args.context_window)) throw new ProtocolError('bad-args', 'context_window must be an integer or null');
      window = args.context_window;
    }
    const route = req(args, 'route', 'object', { optional: true, def: null });
    if (route !== null && (typeof route.provider !== 'string' || typeof route.model !== 'string')) throw new ProtocolError('bad-args', 'route is {provider, model}');
    const queue = parseScripts(args, ProtocolError) ?? [];
    const agent = req(args, 'agent', 'object', { optional: true, def: null });
    if (agent !== null && (Object.keys(agent).some((k) => k !== 'provider' && k !== 'model')
        || Object.values(agent).some((v) => typeof v !== 'string'))) throw new ProtocolError('bad-args', 'agent is {provider?: string, model?: string}');
    const hook = req(args, 'summarize', 'string', { optional: true, def: null });
    if (hook !== null && !SUMMARIZE_HOOKS.includes(hook)) throw new ProtocolError('bad-args', `summarize is one of ${JSON.stringify(SUMMARIZE_HOOKS)}`);
    comp.policy = config;
    comp.prunerConfig = toolResultPruner;
    comp.window = route === null ? window : null;
    comp.capacity = route === null ? null : new Map([[`${route.provider}\u0000${route.model}`, window]]);
    comp.queue = queue;
    if (agent !== null) {
      comp.agentOptions = { ...agent };
      comp.agent.options = { ...agent };
    }
    if (hook !== null) comp.summarizeHook = hook;
    await comp.plugEngine();
    return { configured: true, auto: resolved.auto, generation: world.session.surface.replaceGeneration };
  }

  function measured(kind) {
    if (kind === 'disabled' || basic.routedTarget(world.session) === undefined) return null;
    try {
      return world.ctx.tokenMeter.measure(world.session).totalTokens;
    } catch {
      return null;
    }
  }

  function pressureKind(record, wrote) {
    const last = record.at(-1);
    if (!last) return 'noop';
    if (last.error === undefined) return last.result !== null ? 'compacted' : wrote ? 'pruned' : 'noop';
    return comp.warnings.some((w) => /step compaction failed/.test(String(w.args?.[0] ?? w.content ?? w))) ? 'warned' : 'silent';
  }

  async function preStep(args) {
    await comp.ready;
    const sections = parseSections(args);
    const marker = parseMarker(args);
    const claimed = parseClaimed(args) ?? [];
    const scripts = parseScripts(args, ProtocolError);
    const faults = parseFaults(args, ProtocolError);
    const session = world.session;
    const before = session.events.length;
    const agent = comp.agent;
    const aborted = req(args, 'aborted', 'bool', { optional: true, def: false });
    const candidate = sections === null ? undefined : agent.runtimeContext.project(joinContextSections(sections), sections);
    const auto = comp.engine.config.auto;
    let record = [];
    let regions = [];
    const [decision] = await comp.run(args, scripts, faults, async (op) => {
      record = op.record;
      regions = op.regions;
      if (aborted) op.caller.abort(); // the loop's signal aborted before its pre-step (a cancelled turn)
      return agent.dispatch.waterfall('agent/pre-step', { messages: claimed, turn: marker?.turn ?? 0, step: marker?.step ?? 0,
        signal: op.caller.signal }, () => Promise.resolve({ kind: 'enter', messages: candidate === undefined ? claimed : [...claimed, candidate] }));
    });
    const wrote = session.events.length > before;
    const last = record.at(-1);
    const kind = auto ? pressureKind(record, wrote) : 'disabled';
    // an attempt that failed after an earlier durable success still reports that success (spec 9.2 step 11)
    const reply = { kind, result: resultJson(last?.error !== undefined ? regions.at(-1) ?? null : last?.result ?? null), failure: failureOf(comp, last?.error), measured: measured(kind), logged: [...comp.logged] };
    // spec 13 step 7: step/start, then the entered batch in order (D9: the snapshot is its last member).
    setClock(session.events.at(-1)?.time ?? clock());
    if (marker !== null) session.append('step/start', marker);
    let snapshot = null;
    for (const message of decision.messages) {
      if (message === candidate) {
        snapshot = session.seq;
        session.append('user/message', { ...message, id: `runtime-context-${snapshot}` }, { surfaceOp: 'append' });
      } else {
        session.append('user/message', message, { surfaceOp: 'append' });
      }
    }
    reply.generation = session.surface.replaceGeneration;
    reply.appended = session.events.slice(before).map((e) => e.type);
    if (sections !== null) reply.snapshot = snapshot;
    return reply;
  }

  async function requestError(args) {
    await comp.ready;
    const code = req(args, 'code', 'string');
    const aborted = req(args, 'aborted', 'bool', { optional: true, def: false });
    const scripts = parseScripts(args, ProtocolError);
    const faults = parseFaults(args, ProtocolError);
    const agent = comp.agent;
    let record = [];
    let regions = [];
    const [action, common] = await comp.run(args, scripts, faults, async (op) => {
      record = op.record;
      regions = op.regions;
      if (aborted) op.caller.abort();
      return agent.dispatch.waterfall('agent/request-error', { turn: 0, step: 0, provider: undefined,
        failure: { code, message: `scripted request failure ${code}` }, retryPolicy: undefined, signal: op.caller.signal },
      () => Promise.resolve(undefined));
    });
    const last = record.at(-1);
    return { kind: action?.kind === 'retry' ? 'retry' : 'next', retries: comp.engine.overflowRetries.get(agent) ?? 0,
      result: resultJson(last?.error !== undefined ? regions.at(-1) ?? null : last?.result ?? null),
      failure: failureOf(comp, last?.error), logged: [...comp.logged], ...common };
  }

  return {
    configure,
    pre_step: preStep,
    request_error: requestError,
    ...commandOps(world, comp),
    ...reloadOp(world, comp),
  };
}

export { isAbort };
