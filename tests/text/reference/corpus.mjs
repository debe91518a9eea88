// The comparison corpus: >= 1000 byte strings, generated deterministically (a seeded PRNG, no data files):
// English, code, CJK, Arabic and other scripts, emoji and ZWJ sequences, combining marks (composed and
// decomposed, for NFC), whitespace runs with \r\n and tabs, digit runs, special tokens inside text, long
// runs, and invalid UTF-8. Returns Uint8Array[]; the references see each as new TextDecoder().decode(bytes)
// (invalid sequences -> U+FFFD), which is what colibri's encode does with invalid UTF-8 too.

function mulberry32(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ("the of and to in is was he that it for on are as with his they at be this from I have or by " +
  "one had not but what all were when we there can an your which their said if do will each about how up out " +
  "them then she many some so these would other into has more her two like him see time could no make than " +
  "first been its who now people my made over did down only way find use may water long little very after " +
  "words called just where most know Colibri hummingbird tokenizer Mixture-of-Experts GPU CUDA naïve café " +
  "résumé coöperate façade Zürich São Paulo İstanbul ß straße ŉ ǅ ﬁ ſ").split(" ");
const CONTRACTIONS = ["it's", "I'LL", "they'VE", "we're", "you'd", "I'm", "don't", "She'S", "O'Neil", "rock'n'roll"];
const PUNCT = [".", ",", "!", "?", ";", ":", " -", " —", "...", "'", "\"", "(", ")", "[", "]", "{", "}", "/", "\\",
  "@", "#", "$", "%", "^", "&", "*", "_", "+", "=", "<", ">", "|", "~", "`", "«", "»", "“", "”", "‘", "’", "…", "¿", "¡"];
const CODE = [
  "int main(int argc, char** argv) {\n\treturn 0;\n}\n",
  "def f(x):\n    return x ** 2 + 3*x - 1  # comment\n",
  "for (let i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
  "#include <vector>\n#include \"text/tokenizer.h\"\n",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
  "    if (x != nullptr && x->next) {\r\n        x = x->next;\r\n    }\r\n",
  "const re = /^[a-z0-9_-]{3,16}$/i; // regex",
  "<div class=\"a\"><span id='b'>&amp;&lt;&gt;</span></div>",
  "$ ls -la /usr/share | grep -E '^d' > out.txt 2>&1",
  "fn main() { println!(\"{:?}\", vec![1, 2, 3]); }",
  "x=1;y=2;z=x+y;print(f'{z:08.3f}')",
  "{\"key\": [1, 2.5e-3, true, null], \"nested\": {\"a\": \"b\"}}",
];
const SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
  "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|endofprompt|>", "<|fim_prefix|>",
  "<think>", "</think>", "<｜User｜>", "<|reserved_special_token_5|>", "[BOS]", "<|im_user|>", "<|endoftext|"];
const EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸", "1️⃣", "❤️", "🧑🏿‍🚀", "👩‍💻", "🫠", "😂😂😂", "🐈‍⬛", "✈️", "☕"];
const COMBINING = ["e\u0301", "a\u0308", "o\u0302\u0323", "n\u0303", "A\u030a", "\u212b", "\u2126", "q\u0307\u0323",
  "\u1100\u1161\u11a8", "\u1112\u1161\u11ab", "\u0065\u0327\u0301", "\u0041\u0301\u0316", "\u0915\u093c", "e\u0301\u0301",
  "\u00e9", "\u1e69", "\u0073\u0323\u0307", "\u2000", "\u0344", "\u0958", "\uf900", "\u2fa1d", "x\u20dd", "a\u0352\u0300"];
const SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n ", "\u00a0", "\u3000", "\u2003",
  "\u2028", "\u000b", "\u000c", " \t \n", "\r", "      \n"];

const SCRIPTS = [
  [0x4e00, 0x9fa5],  // CJK ideographs
  [0x3041, 0x3096],  // hiragana
  [0x30a1, 0x30fa],  // katakana
  [0xac00, 0xd7a3],  // Hangul syllables
  [0x0621, 0x064a],  // Arabic letters
  [0x064b, 0x0652],  // Arabic harakat (marks)
  [0x0660, 0x0669],  // Arabic-Indic digits
  [0x05d0, 0x05ea],  // Hebrew
  [0x0905, 0x0939],  // Devanagari letters
  [0x093e, 0x094d],  // Devanagari signs (marks)
  [0x0e01, 0x0e3a],  // Thai
  [0x0410, 0x044f],  // Cyrillic
  [0x0391, 0x03c9],  // Greek
  [0xff01, 0xff5e],  // fullwidth forms
  [0x3000, 0x303f],  // CJK punctuation
  [0x2000, 0x206f],  // general punctuation
  [0x00a1, 0x00ff],  // Latin-1
  [0x0100, 0x017f],  // Latin Extended-A
  [0x2070, 0x209c],  // super/subscripts
  [0x1f300, 0x1f64f],  // emoji
  [0x20000, 0x2a6d6],  // CJK extension B
];

export function makeCorpus() {
  const rand = mulberry32(0xc011b41);
  const pick = (arr) => arr[Math.floor(rand() * arr.length)];
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  const enc = new TextEncoder();
  const fromScript = (n) => {
    const [lo, hi] = pick(SCRIPTS);
    let s = "";
    for (let i = 0; i < n; i++) s += String.fromCodePoint(int(lo, hi));
    return s;
  };
  const english = () => {
    let s = "";
    const n = int(1, 20);
    for (let i = 0; i < n; i++) {
      const r = rand();
      if (r < 0.1) s += pick(CONTRACTIONS);
      else if (r < 0.15) s += pick(WORDS).toUpperCase();
      else s += pick(WORDS);
      if (rand() < 0.2) s += pick(PUNCT);
      s += rand() < 0.9 ? " " : pick(SPACES);
    }
    return s;
  };
  const digits = () => {
    const forms = [() => String(int(0, 10 ** int(1, 12))), () => `${int(0, 999)}.${int(0, 99999)}`,
      () => `${int(1, 999)},${int(100, 999)},${int(100, 999)}`, () => "٠١٢٣٤٥٦٧٨٩".slice(0, int(1, 10)),
      () => "１２３４５".slice(0, int(1, 5)), () => "²³¼½⅓", () => "x" + int(0, 99999) + "y", () => "v1.2.3-rc4"];
    return pick(forms)();
  };
  const fragment = () => {
    const r = rand();
    if (r < 0.25) return english();
    if (r < 0.35) return pick(CODE);
    if (r < 0.5) return fromScript(int(1, 30));
    if (r < 0.58) return pick(EMOJI);
    if (r < 0.66) return pick(COMBINING);
    if (r < 0.76) return pick(SPACES);
    if (r < 0.86) return digits();
    if (r < 0.94) return pick(SPECIALS);
    return pick(PUNCT);
  };

  const strings = [];
  // Fixed edge cases.
  for (const s of ["", " ", "a", "\n", "  leading", "trailing  ", "a".repeat(1000), " ".repeat(500),
    "\n".repeat(100), "1".repeat(200), "ab".repeat(300), "漢".repeat(300), "😀".repeat(50), "\t \r\n".repeat(40),
    "Hello world", "Hello, world! It's 2024.", "<|endoftext|>", "<|endoftext|><|endoftext|>", "x<|im_start|>y",
    "<｜begin▁of▁sentence｜>Hi", "It's I'M we'Re", "ſ's 'S 'ſ", "\u1100\u1161\u11a8 \uac01", "e\u0301\u0327"]) {
    strings.push(enc.encode(s));
  }
  // Each category on its own, then random mixtures.
  for (let i = 0; i < 150; i++) strings.push(enc.encode(english()));
  for (const c of CODE) strings.push(enc.encode(c));
  for (let i = 0; i < 150; i++) strings.push(enc.encode(fromScript(int(1, 80))));
  for (const e of EMOJI) strings.push(enc.encode(e + " " + pick(EMOJI) + pick(WORDS)));
  for (const c of COMBINING) strings.push(enc.encode(pick(WORDS) + c + pick(WORDS) + " " + c));
  for (let i = 0; i < 60; i++) strings.push(enc.encode(pick(SPACES) + english() + pick(SPACES) + pick(SPACES)));
  for (let i = 0; i < 60; i++) strings.push(enc.encode(digits() + pick(SPACES) + digits() + digits()));
  for (let i = 0; i < 60; i++) strings.push(enc.encode(english() + pick(SPECIALS) + english() + pick(SPECIALS)));
  for (let i = 0; i < 400; i++) {
    let s = "";
    const n = int(1, 8);
    for (let k = 0; k < n; k++) s += fragment();
    strings.push(enc.encode(s));
  }
  // Invalid UTF-8: stray and truncated sequences, overlongs, surrogates, bytes above U+10FFFF, random bytes.
  const bad = [[0x80], [0xbf, 0x80], [0xc0, 0xaf], [0xc3], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xff], [0xfe, 0xfe], [0xe0, 0x80, 0x80], [0xc2, 0x41]];
  for (let i = 0; i < 100; i++) {
    const parts = [enc.encode(fragment()), Uint8Array.from(pick(bad)), enc.encode(rand() < 0.5 ? fragment() : "")];
    if (rand() < 0.3) parts.push(Uint8Array.from({ length: int(1, 12) }, () => int(0, 255)));
    const total = parts.reduce((a, p) => a + p.length, 0);
    const out = new Uint8Array(total);
    let o = 0;
    for (const p of parts) { out.set(p, o); o += p.length; }
    strings.push(out);
  }
  return strings;
}
