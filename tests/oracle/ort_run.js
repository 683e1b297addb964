#!/usr/bin/env node
// ONNX Runtime oracle for onnxptq's tests and benchmarks.
//
//   node tests/oracle/ort_run.js MODEL.onnx --inputs [name=]file.npy ... [--outputs OUT_DIR]
//        [--threads N] [--repeat N] [--warmup N] [--json] [--literal]
//   node tests/oracle/ort_run.js MODEL.onnx --random SEED [--shape name=1x3x640x640 ...]
//        [--outputs OUT_DIR] ...
//
// Runs MODEL once (or --warmup + --repeat times) on the CPU execution provider and
// writes every output to OUT_DIR/<output name, '/' and ':' -> '_'>.npy in the
// output's own dtype. With --random, the generated inputs are also written to
// OUT_DIR/inputs/<name>.npy so another engine can be fed the same data.
//
// --literal turns ORT's graph optimizations off: every node runs as its own kernel, as the ONNX
// spec defines it (ORT's fused quantized kernels, QLinearAdd say, round exact ties otherwise).
//
// --outputs may be left out (e.g. for pure timing runs): nothing is written then.
// --warmup defaults to 1 when --repeat is given, else 0. --json prints one line:
// {"model","threads","latencies_ms","median_ms","peak_rss_mb","outputs":[{"name","dtype","shape"}]}.
// Any error prints one line "error: ..." to stderr and exits with status 2.
//
// onnxruntime-node is resolved from the repo's node_modules (npm ci --ignore-scripts).
'use strict';

const fs = require('fs');
const path = require('path');

// ---------------------------------------------------------------------------
// .npy reading and writing (format versions 1.0, 2.0, 3.0; C order only)
// ---------------------------------------------------------------------------

// numpy descr (byte order stripped) -> ORT tensor type and JS storage.
// float16 has no JS typed array in Node 20: ORT takes its raw bits in a Uint16Array.
// bool is one byte per element, as in numpy and ORT.
const NPY_TYPES = {
  f4: { ort: 'float32', Array: Float32Array },
  f8: { ort: 'float64', Array: Float64Array },
  f2: { ort: 'float16', Array: Uint16Array },
  i1: { ort: 'int8', Array: Int8Array },
  u1: { ort: 'uint8', Array: Uint8Array },
  i2: { ort: 'int16', Array: Int16Array },
  u2: { ort: 'uint16', Array: Uint16Array },
  i4: { ort: 'int32', Array: Int32Array },
  u4: { ort: 'uint32', Array: Uint32Array },
  i8: { ort: 'int64', Array: BigInt64Array },
  u8: { ort: 'uint64', Array: BigUint64Array },
  b1: { ort: 'bool', Array: Uint8Array },
};
const ORT_TO_DESCR = {};
for (const [code, t] of Object.entries(NPY_TYPES)) {
  // Single-byte types are written with '|' (no byte order), as numpy does.
  ORT_TO_DESCR[t.ort] = (t.Array.BYTES_PER_ELEMENT === 1 ? '|' : '<') + code;
}

const NPY_MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // "\x93NUMPY"

class UserError extends Error {}
function fail(msg) {
  throw new UserError(msg);
}

function product(dims) {
  return dims.reduce((a, b) => a * b, 1);
}

// Parses a .npy file into { dtype (ORT type name), shape, data (typed array) }.
function readNpy(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    fail(`cannot read ${file}: ${e.code || e.message}`);
  }
  const bad = (why) => fail(`${file}: not a supported .npy file: ${why}`);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(NPY_MAGIC)) bad('bad magic');
  const major = buf[6];
  let headerLen;
  let headerStart;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) bad('truncated header');
    headerLen = buf.readUInt32LE(8);
    headerStart = 12;
  } else {
    bad(`format version ${major}.${buf[7]}`);
  }
  const dataStart = headerStart + headerLen;
  if (dataStart > buf.length) bad('truncated header');
  // v1/v2 headers are latin1, v3 utf8; the keys we need are ASCII either way.
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', headerStart, dataStart);

  // The header is a Python dict literal; numpy always writes these three keys.
  const descrM = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortranM = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shapeM = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descrM) bad(`no simple 'descr' in header (structured dtypes are not supported): ${header.trim()}`);
  if (!fortranM || !shapeM) bad(`malformed header: ${header.trim()}`);
  if (fortranM[1] === 'True') fail(`${file}: fortran_order=True arrays are not supported; save a C-ordered array (np.ascontiguousarray)`);

  const descr = descrM[1];
  const order = descr[0];
  const code = descr.slice(1);
  const t = NPY_TYPES[code];
  if (!t || !'<>|='.includes(order)) fail(`${file}: unsupported dtype '${descr}'`);
  // '=' is native order, little-endian on every platform ORT's Node build runs on.
  if (order === '>' && t.Array.BYTES_PER_ELEMENT > 1) fail(`${file}: big-endian dtype '${descr}' is not supported`);
  const shape = shapeM[1]
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      // Old numpy on some platforms wrote '3L' for Python 2 longs.
      const n = Number(s.replace(/L$/, ''));
      if (!Number.isInteger(n) || n < 0) bad(`bad shape (${shapeM[1]})`);
      return n;
    });

  const count = product(shape);
  const nbytes = count * t.Array.BYTES_PER_ELEMENT;
  if (buf.length - dataStart !== nbytes) {
    bad(`data is ${buf.length - dataStart} bytes, shape (${shape.join(', ')}) of ${descr} needs ${nbytes}`);
  }
  // Copy into a fresh, aligned buffer: the data offset in the file need not be
  // a multiple of the element size, and typed arrays require that.
  const data = new t.Array(count);
  new Uint8Array(data.buffer).set(buf.subarray(dataStart, dataStart + nbytes));
  return { dtype: t.ort, shape, data };
}

// Writes a typed array as a .npy v1.0 file (v2.0 if the header would not fit).
function writeNpy(file, dtype, shape, data) {
  const descr = ORT_TO_DESCR[dtype];
  if (!descr) fail(`cannot write ${file}: unsupported dtype '${dtype}'`);
  const shapeStr = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  // numpy pads the header with spaces and a final '\n' so the data starts on a
  // 64-byte boundary; readers (and mmap users) rely on that alignment.
  const pad = (prefix) => {
    const total = Math.ceil((prefix + dict.length + 1) / 64) * 64;
    return dict + ' '.repeat(total - prefix - dict.length - 1) + '\n';
  };
  let major = 1;
  let text = pad(10);
  if (text.length > 0xffff) {
    major = 2;
    text = pad(12);
  }
  const pre = Buffer.alloc(major === 1 ? 10 : 12);
  NPY_MAGIC.copy(pre, 0);
  pre[6] = major;
  pre[7] = 0;
  if (major === 1) pre.writeUInt16LE(text.length, 8);
  else pre.writeUInt32LE(text.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const expected = product(shape) * (NPY_TYPES[descr.slice(1)].Array.BYTES_PER_ELEMENT);
  if (body.length !== expected) fail(`cannot write ${file}: ${body.length} data bytes for shape [${shape}] ${dtype}`);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(text, 'latin1'), body]));
}

// ---------------------------------------------------------------------------
// Deterministic inputs for --random
// ---------------------------------------------------------------------------

// mulberry32: a small 32-bit PRNG; one stream per run, seeded with SEED, consumed
// by the model inputs in model order, elements in C order. Each float is the top
// 24 bits of a draw divided by 2^24: exact in float32 and always < 1.
function mulberry32(seed) {
  let state = seed >>> 0;
  return function next() {
    state = (state + 0x6d2b79f5) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return (z ^ (z >>> 14)) >>> 0;
  };
}

function randomFloat32(next, count) {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (next() >>> 8) / 16777216;
  return out;
}

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

const USAGE = 'usage: ort_run.js MODEL.onnx (--inputs [name=]file.npy ... | --random SEED [--shape name=AxBx...]) ' +
    '[--outputs OUT_DIR] [--threads N] [--repeat N] [--warmup N] [--json] [--literal]';

function parseIntArg(opt, s, min) {
  if (s === undefined || !/^\d+$/.test(s) || Number(s) < min) fail(`${opt} needs an integer >= ${min}, got '${s ?? ''}'`);
  return Number(s);
}

function parseArgs(argv) {
  const a = { model: null, inputs: [], shapes: new Map(), outputs: null, threads: 1, repeat: null, warmup: null, json: false, random: null, literal: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    // Options that take a list consume tokens until the next "--option".
    const takeList = () => {
      const list = [];
      while (i + 1 < argv.length && !argv[i + 1].startsWith('--')) list.push(argv[++i]);
      if (list.length === 0) fail(`${arg} needs at least one value`);
      return list;
    };
    const takeOne = () => {
      if (i + 1 >= argv.length || argv[i + 1].startsWith('--')) fail(`${arg} needs a value`);
      return argv[++i];
    };
    switch (arg) {
      case '--inputs': a.inputs.push(...takeList()); break;
      case '--shape':
        for (const s of takeList()) {
          const m = /^(.+)=(\d+(?:x\d+)*)$/.exec(s);
          if (!m) fail(`--shape expects name=AxBx..., got '${s}'`);
          a.shapes.set(m[1], m[2].split('x').map(Number));
        }
        break;
      case '--outputs': a.outputs = takeOne(); break;
      case '--threads': a.threads = parseIntArg(arg, takeOne(), 1); break;
      case '--repeat': a.repeat = parseIntArg(arg, takeOne(), 1); break;
      case '--warmup': a.warmup = parseIntArg(arg, takeOne(), 0); break;
      case '--random': a.random = parseIntArg(arg, takeOne(), 0); break;
      case '--json':
        a.json = true;
        break;
      case '--literal':
        a.literal = true;
        break;
      case '-h':
      case '--help':
        process.stdout.write(USAGE + '\n');
        process.exit(0);
        break;
      default:
        if (arg.startsWith('-')) fail(`unknown option '${arg}'`);
        if (a.model !== null) fail(`unexpected argument '${arg}' (model already given: ${a.model})`);
        a.model = arg;
    }
  }
  if (a.model === null) fail(`no model given; ${USAGE}`);
  if (a.random !== null && a.inputs.length > 0) fail('give either --inputs or --random, not both');
  if (a.random === null && a.shapes.size > 0) fail('--shape only applies with --random');
  if (a.random !== null && a.random > 0xffffffff) fail('--random SEED must fit in 32 bits');
  if (a.warmup === null) a.warmup = a.repeat === null ? 0 : 1;
  return a;
}

// '/' and ':' are common in ONNX value names but not usable in file names.
function sanitize(name) {
  return name.replace(/[/:]/g, '_');
}

function formatShape(dims) {
  return dims.join('x') || 'scalar';
}

// ---------------------------------------------------------------------------
// Feeds
// ---------------------------------------------------------------------------

// Checks a loaded array against the model input's declared type and shape, so a
// mismatch is reported with names instead of as an ORT runtime error.
function checkAgainstMetadata(meta, arr, file) {
  if (!meta || !meta.isTensor) return;
  if (meta.type !== arr.dtype) fail(`input '${meta.name}' is ${meta.type} but ${file} holds ${arr.dtype}`);
  const want = meta.shape;
  const bad =
    want.length !== arr.shape.length ||
    want.some((d, k) => typeof d === 'number' && d >= 0 && d !== arr.shape[k]);
  if (bad) fail(`input '${meta.name}' expects shape [${want.join(', ')}] but ${file} has [${arr.shape.join(', ')}]`);
}

function feedsFromFiles(ort, session, specs) {
  const names = session.inputNames;
  const meta = new Map(session.inputMetadata.map((m) => [m.name, m]));
  const chosen = new Map(); // input name -> file
  const positional = [];
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    if (eq > 0) {
      const name = spec.slice(0, eq);
      if (names.includes(name)) {
        if (chosen.has(name)) fail(`input '${name}' given twice`);
        chosen.set(name, spec.slice(eq + 1));
        continue;
      }
      // A path that happens to contain '=' is still accepted as positional.
      if (!fs.existsSync(spec)) fail(`unknown input name '${name}' (model inputs: ${names.join(', ')})`);
    }
    positional.push(spec);
  }
  // Positional files fill the inputs not named explicitly, in model order.
  const free = names.filter((n) => !chosen.has(n));
  if (positional.length > free.length) fail(`${specs.length} input files given but the model has ${names.length} inputs (${names.join(', ')})`);
  positional.forEach((file, k) => chosen.set(free[k], file));
  const missing = names.filter((n) => !chosen.has(n));
  if (missing.length) fail(`no data for model input(s): ${missing.join(', ')}`);

  const feeds = {};
  for (const name of names) {
    const file = chosen.get(name);
    const arr = readNpy(file);
    checkAgainstMetadata(meta.get(name), arr, file);
    feeds[name] = new ort.Tensor(arr.dtype, arr.data, arr.shape);
  }
  return feeds;
}

function feedsFromRandom(ort, session, seed, shapes) {
  const next = mulberry32(seed);
  const feeds = {};
  for (const name of shapes.keys()) {
    if (!session.inputNames.includes(name)) fail(`--shape for unknown input '${name}' (model inputs: ${session.inputNames.join(', ')})`);
  }
  for (const m of session.inputMetadata) {
    if (!m.isTensor) fail(`input '${m.name}' is not a tensor; --random cannot fill it`);
    if (m.type !== 'float32') fail(`input '${m.name}' is ${m.type}; --random only generates float32`);
    let dims = m.shape;
    const given = shapes.get(m.name);
    if (given) {
      const clash = given.length !== dims.length || dims.some((d, k) => typeof d === 'number' && d >= 0 && d !== given[k]);
      if (clash) fail(`--shape ${m.name}=${given.join('x')} does not match the model's [${dims.join(', ')}]`);
      dims = given;
    } else if (dims.some((d) => typeof d !== 'number' || d < 0)) {
      fail(`input '${m.name}' has dynamic shape [${dims.join(', ')}]; give --shape ${m.name}=AxBx...`);
    }
    feeds[m.name] = new ort.Tensor('float32', randomFloat32(next, product(dims)), dims);
  }
  return feeds;
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

function loadOrt() {
  // Resolve from the repository root so the script works from any cwd.
  const repoRoot = path.resolve(__dirname, '..', '..');
  try {
    return require(require.resolve('onnxruntime-node', { paths: [repoRoot] }));
  } catch (e) {
    fail(`cannot load onnxruntime-node (run 'npm ci --ignore-scripts' in ${repoRoot}): ${e.message}`);
  }
}

// Writes each output as <dir>/<sanitized name>.npy; refuses two names that
// sanitize to the same file rather than silently overwriting one.
function writeTensors(dir, tensors) {
  fs.mkdirSync(dir, { recursive: true });
  const used = new Map();
  for (const [name, t] of Object.entries(tensors)) {
    const base = sanitize(name) + '.npy';
    if (used.has(base)) fail(`values '${used.get(base)}' and '${name}' would both be written to ${base}`);
    used.set(base, name);
    writeNpy(path.join(dir, base), t.type, t.dims, t.data);
  }
}

// Peak resident memory of this process in MiB. On Linux getrusage's ru_maxrss
// (process.resourceUsage().maxRSS) survives fork+exec: run from a big parent
// (a Python with torch loaded, a benchmark harness) it reports the parent's RSS
// at spawn time. VmHWM belongs to the process's own address space, so it does not.
function peakRssMb() {
  try {
    const m = /^VmHWM:\s*(\d+)\s*kB/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) return Number(m[1]) / 1024;
  } catch (e) {
    // no /proc: fall through
  }
  return process.resourceUsage().maxRSS / 1024; // maxRSS is in KiB
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(args.model)) fail(`model not found: ${args.model}`);
  if (args.random === null && args.inputs.length === 0) fail('no inputs: give --inputs FILES or --random SEED');
  const ort = loadOrt();

  let session;
  try {
    session = await ort.InferenceSession.create(args.model, {
      executionProviders: ['cpu'],
      intraOpNumThreads: args.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: args.literal ? 'disabled' : 'all',
      // Only ORT errors on stderr (they also reach us as exceptions): its
      // warnings, e.g. about unused initializers, are multi-line noise here.
      logSeverityLevel: 3,
    });
  } catch (e) {
    fail(`cannot load model ${args.model}: ${e.message}`);
  }

  // Refuse unsavable outputs before running. This is not only tidier: an int4/uint4
  // graph output makes onnxruntime-node 1.30 abort the whole process (V8 OOM in
  // OrtValueToNapiValue), which no try/catch can report.
  for (const m of session.outputMetadata) {
    if (!m.isTensor || !ORT_TO_DESCR[m.type]) {
      fail(`output '${m.name}' has type ${m.isTensor ? m.type : 'non-tensor'}, which cannot be saved as .npy`);
    }
  }

  const feeds =
    args.random !== null
      ? feedsFromRandom(ort, session, args.random, args.shapes)
      : feedsFromFiles(ort, session, args.inputs);
  if (args.random !== null && args.outputs !== null) writeTensors(path.join(args.outputs, 'inputs'), feeds);

  const runOnce = async () => {
    try {
      return await session.run(feeds);
    } catch (e) {
      fail(`inference failed: ${e.message}`);
    }
  };
  for (let i = 0; i < args.warmup; i++) await runOnce();
  const latencies = [];
  let results;
  for (let i = 0; i < (args.repeat ?? 1); i++) {
    const t0 = process.hrtime.bigint();
    results = await runOnce();
    latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }

  for (const [name, v] of Object.entries(results)) {
    if (!(v instanceof ort.Tensor) || !ORT_TO_DESCR[v.type]) fail(`output '${name}' has type ${v.type ?? typeof v}, which cannot be saved as .npy`);
  }
  if (args.outputs !== null) writeTensors(args.outputs, results);

  const outputs = session.outputNames.map((n) => ({ name: n, dtype: results[n].type, shape: results[n].dims.slice() }));
  if (args.json) {
    process.stdout.write(
      JSON.stringify({
        model: args.model,
        threads: args.threads,
        latencies_ms: latencies.map((x) => Math.round(x * 1000) / 1000),
        median_ms: Math.round(median(latencies) * 1000) / 1000,
        peak_rss_mb: Math.round(peakRssMb() * 10) / 10,
        outputs,
      }) + '\n',
    );
  } else {
    if (args.repeat !== null) {
      latencies.forEach((ms, i) => console.log(`run ${i + 1}: ${ms.toFixed(3)} ms`));
      console.log(`median: ${median(latencies).toFixed(3)} ms over ${latencies.length} runs (${args.warmup} warmup, ${args.threads} threads)`);
    }
    for (const o of outputs) {
      const where = args.outputs !== null ? ` -> ${path.join(args.outputs, sanitize(o.name) + '.npy')}` : '';
      console.log(`${o.name}: ${o.dtype} ${formatShape(o.shape)}${where}`);
    }
  }
  await session.release();
}

if (require.main === module) {
  main().catch((e) => {
    // Native ORT errors can span lines; the contract is one line on stderr.
    const msg = e instanceof UserError ? e.message : `${e.name || 'Error'}: ${e.message}`;
    process.stderr.write(`error: ${String(msg).replace(/\s*\n\s*/g, ' ').trim()}\n`);
    process.exit(2);
  });
}

module.exports = { readNpy, writeNpy, mulberry32, sanitize };
