// The peer side of bench/peer: llama.cpp as users get it (node-llama-cpp's prebuilt binaries, pinned by
// package-lock.json), driven with token ids so that it sees exactly the input coli sees.
//
// Usage (after `npm ci` here; peer_bench.py runs it):
//   node peer.mjs --model FILE.gguf --ids 1,2,3 [--decode 64] [--threads 2] [--gpu cpu|cuda|vulkan]
//   node peer.mjs --model FILE.gguf --ids 1,2,3 --agree [--threads 2] [--gpu ...]
//
// Timing mode prints one JSON line: load_s (getLlama + loadModel + createContext), prefill_s (the prompt
// evaluated and the first token picked, greedy), decode_s for the decode_tokens after it (each evaluated
// and picked, as `coli run` counts them), the generated ids, and VmHWM (peak RSS, kB) of this process.
// --agree evaluates the prompt teacher-forced and prints, for every position, the greedy next token
// (controlledEvaluate with generateNext): the peer's top-1 prediction after each prompt prefix, and its 8
// most likely tokens with their probabilities.
import fs from "node:fs";
import {getLlama} from "node-llama-cpp";

function parseArgs(argv) {
    const a = {decode: 64, threads: 0, gpu: "cpu", agree: false, ctx: 0};
    for (let i = 2; i < argv.length; ++i) {
        const k = argv[i];
        const next = () => {
            if (i + 1 >= argv.length) throw new Error(`${k} needs a value`);
            return argv[++i];
        };
        if (k === "--model") a.model = next();
        else if (k === "--ids") a.ids = next().split(",").map(Number);
        else if (k === "--decode") a.decode = Number(next());
        else if (k === "--threads") a.threads = Number(next());
        else if (k === "--gpu") a.gpu = next();
        else if (k === "--ctx") a.ctx = Number(next());
        else if (k === "--agree") a.agree = true;
        else throw new Error(`unknown option ${k}`);
    }
    if (!a.model || !a.ids || a.ids.some((t) => !Number.isInteger(t) || t < 0))
        throw new Error("usage: node peer.mjs --model FILE.gguf --ids 1,2,3 [--decode N] [--threads T] " +
                        "[--gpu cpu|cuda|vulkan] [--agree]");
    if (!["cpu", "cuda", "vulkan"].includes(a.gpu))
        throw new Error(`--gpu must be cpu, cuda or vulkan, got ${a.gpu}`);
    return a;
}

function peakRssKb() {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync("/proc/self/status", "utf8"));
    return m ? Number(m[1]) : null;
}

const AGREE_TOP = 8;  // --agree: the most likely tokens (and their probabilities) printed per position
const BATCH = 512;  // llama.cpp's default logical batch: a 512-token prompt is one batch

async function main() {
    const a = parseArgs(process.argv);
    const t0 = performance.now();
    // build "never": the prebuilt binaries only, never a local build; maxThreads 0: `threads` is taken as is.
    const llama = await getLlama({gpu: a.gpu === "cpu" ? false : a.gpu, build: "never", maxThreads: 0,
                                  logLevel: "error"});
    const model = await llama.loadModel({modelPath: a.model, gpuLayers: a.gpu === "cpu" ? 0 : "max"});
    const contextSize = a.ctx > 0 ? a.ctx : a.ids.length + a.decode + 1;
    const context = await model.createContext({contextSize, batchSize: Math.min(BATCH, contextSize),
                                               ...(a.threads > 0 ? {threads: a.threads} : {})});
    const sequence = context.getSequence();
    const loadS = (performance.now() - t0) / 1e3;
    const info = {peer: "node-llama-cpp", gpu: llama.gpu || "cpu", build: llama.buildType,
                  threads: context.currentThreads, context: context.contextSize, load_s: loadS};

    if (a.agree) {
        // probabilities: the softmax over the whole vocabulary (before sampling), highest first.
        const input = a.ids.map((t) => [t, {generateNext: {token: true, probabilities: true,
                                                          options: {temperature: 0}}}]);
        const out = await sequence.controlledEvaluate(input);
        const top1 = out.map((o) => (o && o.next && o.next.token != null ? o.next.token : -1));
        const top = out.map((o) => (o && o.next && o.next.probabilities
                                        ? [...o.next.probabilities.entries()].slice(0, AGREE_TOP) : []));
        console.log(JSON.stringify({...info, top1, top, vmhwm_kb: peakRssKb()}));
        return;
    }

    const ids = [];
    const gen = sequence.evaluate(a.ids, {temperature: 0});
    const t1 = performance.now();
    let r = await gen.next();
    const t2 = performance.now();
    if (!r.done) ids.push(r.value);
    while (ids.length < a.decode) {
        r = await gen.next();
        if (r.done) break;
        ids.push(r.value);
    }
    const t3 = performance.now();
    await gen.return();
    console.log(JSON.stringify({...info, prompt_tokens: a.ids.length, prefill_s: (t2 - t1) / 1e3,
                                decode_tokens: ids.length - 1, decode_s: (t3 - t2) / 1e3, ids,
                                vmhwm_kb: peakRssKb()}));
}

main().then(() => process.exit(0), (e) => {
    console.error(`peer.mjs: ${e.stack || e}`);
    process.exit(1);
});
