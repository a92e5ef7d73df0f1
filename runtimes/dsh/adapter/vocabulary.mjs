#!/usr/bin/env node
// What dsh itself accepts, read from its own packages (surfacecheck.runtime.dsh_vocabulary writes
// surfacecheck/runtime/dsh_vocabulary.json from this): one JSON document on stdout.
//   events  - dsh-session's KNOWN_SESSION_EVENT_TYPES, the event vocabulary its read path understands;
//   blocks  - the content-block kinds the token meter prices apart (estimateContent's cases; others: "other");
//   config  - the config schemas of compaction-basic and the tool-result pruner, field by field;
//   checks  - every refusal message of their config resolvers (the config.js regions), as written in the source;
//   compact - the /compact command's usage text and whether it trims its raw input;
//   agent   - the AgentOptions fields compaction-basic reads (`agent.options.X`), with their declared types.
import './register.mjs';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadDsh, MODULES_DIR } from './dsh.mjs';

const bundle = (pkg) => readFileSync(join(MODULES_DIR, '@deepseek-ai', pkg, 'lib', 'index.js'), 'utf8');

function region(text, name) {
  const start = text.indexOf(`//#region ${name}`);
  if (start < 0) throw new Error(`no region ${name}`);
  const end = text.indexOf('//#endregion', start);
  return { text: text.slice(start, end), line: text.slice(0, start).split('\n').length };
}

function throws(pkg, name) {
  const { text, line } = region(bundle(pkg), name);
  const found = [];
  const pattern = /throw new (\w+)\((?:[^,`"]*,\s*)?(`(?:[^`\\]|\\.)*`|"(?:[^"\\]|\\.)*")/g;
  for (const match of text.matchAll(pattern)) {
    found.push({ package: pkg, file: name, line: line + text.slice(0, match.index).split('\n').length - 1,
                 error: match[1], message: match[2].slice(1, -1) });
  }
  return found;
}

function blockKinds() {
  const { text } = region(bundle('dsh-token-meter'), 'lib/types/estimate.js');
  const body = text.slice(text.indexOf('function estimateContent'), text.indexOf('function estimateMessage'));
  return [...body.matchAll(/case "([a-z-]+)"/g)].map((m) => m[1]);
}

// A schema's fields by path ("modelPolicies[].retainTokens"), each {type, ...meta}: the refs inlined, so the
// document does not depend on the order schemas were created in.
function fields(schema) {
  const { uid, refs } = schema.toJSON();
  const out = {};
  const walk = (id, path) => {
    const node = refs[id];
    if (path) out[path] = { type: node.type, ...node.meta };
    if (node.type === 'object') for (const [key, child] of Object.entries(node.dict)) walk(child, path ? `${path}.${key}` : key);
    if (node.type === 'array') walk(node.inner, `${path}[]`);
  };
  walk(uid, '');
  return out;
}

// The AgentOptions fields compaction-basic reads, each with its type as dsh-agent declares it.
function agentOptions() {
  const read = new Set([...bundle('dsh-compaction-basic').matchAll(/agent\.options\.(\w+)/g)].map((m) => m[1]));
  const types = readFileSync(join(MODULES_DIR, '@deepseek-ai', 'dsh-agent', 'lib', 'types', 'runtime-types.d.ts'), 'utf8');
  const start = types.indexOf('interface AgentOptions');
  if (start < 0) throw new Error('dsh-agent declares no AgentOptions');
  const body = types.slice(start, types.indexOf('\n}', start));
  const out = {};
  for (const name of [...read].sort()) {
    const decl = new RegExp(`\\n\\s*(?:readonly\\s+)?${name}(\\??):\\s*([^;]+);`).exec(body);
    if (!decl) throw new Error(`AgentOptions declares no ${name}`);
    out[name] = { type: decl[2].trim(), optional: decl[1] === '?' };
  }
  return out;
}

const { mods } = await loadDsh();
const compactSource = bundle('dsh-command-compact');
const usage = /const USAGE = "([^"]*)"/.exec(compactSource);
console.log(JSON.stringify({
  events: [...mods['dsh-session'].KNOWN_SESSION_EVENT_TYPES].sort(),
  blocks: blockKinds(),
  config: {
    'compaction-basic': fields(mods['dsh-compaction-basic'].BasicCompactionEngine.Config),
    'tool-result-pruner': fields(mods['dsh-compaction-tool-result-pruner'].ToolResultPruner.Config),
  },
  checks: [...throws('dsh-compaction-basic', 'lib/types/config.js'),
           ...throws('dsh-compaction-tool-result-pruner', 'lib/types/config.js')],
  compact: { usage: usage ? usage[1] : null, trims: compactSource.includes('invocation.rawInput.trim().length > 0') },
  agent: agentOptions(),
}));
