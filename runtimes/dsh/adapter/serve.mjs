#!/usr/bin/env node
// surfacecheck-runtime/1 over dsh's own code (docs/protocol.md; runtimes/dsh/README.md).
// Framing only: one JSON request per stdin line, one response per stdout line, diagnostics on stderr.
import './register.mjs'; // module hooks first: expose dsh bundle internals (hooks.mjs)
import { createInterface } from 'node:readline';
import { loadDsh } from './dsh.mjs';
import { install as installClock } from './clock.mjs';
import { World } from './world.mjs';
import { ProtocolError } from './refusal.mjs';
import { logOps } from './log.mjs';
import { meterOps } from './meter.mjs';
import { storageOps } from './storage.mjs';
import { strykerHooks } from './stryker.mjs';

const PROTOCOL = 'surfacecheck-runtime/1';
const OPS_BY_LEVEL = {
  log: ['reset', 'append', 'surface', 'cuts', 'measure', 'projection', 'events', 'meter_replay'],
  compaction: ['select_range', 'prune', 'compact'],
  policy: ['configure', 'pre_step', 'request_error', 'manual_compact', 'reload'],
};
const OPTIONAL_OPS = ['closers', 'rows', 'decode']; // read-only persistence views, any level (storage.mjs)

async function optional(path, world) {
  try {
    const mod = await import(path);
    return mod.ops(world);
  } catch (err) {
    if (err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes(path.replace('./', ''))) return null;
    throw err;
  }
}

async function main() {
  installClock();
  let dsh;
  try {
    dsh = await loadDsh();
  } catch (err) {
    process.stderr.write(`surfacecheck dsh adapter: cannot load dsh: ${err.message}\n`);
    process.exit(4);
  }
  // dsh's contained-listener warnings go to cordis's logger; keep stdout for responses only.
  const stryker = strykerHooks(); // surfacecheck mutate only (stryker.mjs)
  const world = new World(dsh);
  await world.open();
  stryker?.started();
  const handlers = { ...logOps(world), ...meterOps(world), ...storageOps(world) };
  const levels = ['log'];
  for (const [level, path] of [['compaction', './compaction.mjs'], ['policy', './policy.mjs']]) {
    const ops = await optional(path, world);
    if (!ops) break;
    Object.assign(handlers, ops);
    levels.push(level);
  }
  const bench = await optional('./bench.mjs', world);
  if (bench) Object.assign(handlers, bench);
  if (stryker) Object.assign(handlers, stryker.ops(handlers));

  const allOps = new Set(Object.values(OPS_BY_LEVEL).flat());
  async function handle(request) {
    const { op } = request;
    if (op === 'hello') {
      return { protocol: PROTOCOL, name: `dsh ${dsh.versions['@deepseek-ai/dsh-session']}`, levels,
        ops: [...levels.flatMap((level) => OPS_BY_LEVEL[level].filter((name) => name in handlers)), ...OPTIONAL_OPS],
        modules: dsh.modulesDir, versions: dsh.versions };
    }
    const handler = handlers[op];
    if (!handler) {
      if (allOps.has(op)) throw new ProtocolError('unsupported-level', `op '${op}' belongs to a level this runtime does not support`);
      if (op === 'bench') throw new ProtocolError('unsupported', 'bench is not available');
      throw new ProtocolError('unknown-op', `unknown op '${op}'`);
    }
    let args = request.args ?? {};
    if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new ProtocolError('bad-args', 'args must be a JSON object');
    return await handler(args);
  }

  const write = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let request;
    try {
      request = JSON.parse(line);
      if (request === null || typeof request !== 'object' || typeof request.op !== 'string') throw new Error('no op');
    } catch (err) {
      write({ id: request?.id ?? null, error: { type: 'bad-request', message: `not a request: ${err.message}` } });
      continue;
    }
    try {
      write({ id: request.id, result: await handle(request) });
    } catch (err) {
      if (err instanceof ProtocolError) write({ id: request.id, error: { type: err.type, message: err.message } });
      else {
        process.stderr.write(`internal error on ${request.op}: ${err?.stack ?? err}\n`);
        write({ id: request.id, error: { type: 'internal', message: `${err?.name ?? 'Error'}: ${err?.message ?? err}` } });
      }
    }
  }
  process.exit(0);
}

main();
