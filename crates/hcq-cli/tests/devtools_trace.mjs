// Loads a trace with Chrome DevTools' own trace engine (the `@paulirish/trace_engine` npm
// package: the DevTools performance panel's model, published for Node) and prints, as one JSON
// object, what DevTools makes of it: its processes and threads, the spans on each thread, and
// the flows (arrows) it bound to events. `crates/hcq-cli/tests/trace.rs` compares that with
// what hcq ran.
//
//   node devtools_trace.mjs ENGINE_DIR TRACE.json
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [engineDir, tracePath] = process.argv.slice(2);
const Trace = await import(pathToFileURL(path.join(engineDir, 'models/trace/trace.js')).href);
// The engine computes layout boxes for its insights with the browser's DOMRect.
globalThis.DOMRect ??= class {
  constructor(x = 0, y = 0, width = 0, height = 0) {
    Object.assign(this, { x, y, width, height });
  }
};
const raw = JSON.parse(fs.readFileSync(tracePath, 'utf8'));
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(Array.isArray(raw) ? raw : raw.traceEvents);
const data = model.parsedTrace().data;

const threads = [];
for (const [pid, process] of data.Renderer.processes) {
  for (const [tid, thread] of process.threads) {
    threads.push({
      pid,
      tid,
      process: process.name ?? null,
      name: thread.name ?? null,
      spans: thread.entries.map((e) => ({ name: e.name, ts: e.ts, dur: e.dur ?? 0 })),
    });
  }
}
const flows = data.Flows.flows.map((flow) =>
  flow.map((e) => ({ name: e.name, ph: e.ph, pid: e.pid, tid: e.tid, ts: e.ts })));
console.log(JSON.stringify({ threads, flows }));
