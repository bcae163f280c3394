// pow.js solves a buy ticket's proof of work off the page's thread: the
// first nonce n (counted in decimal) such that SHA-256(challenge + ":" + n)
// starts with `difficulty` zero bits. It reports how many it tried every
// batch, and the nonce at the end.
const batch = 512;

function zeros(b) {
  let z = 0;
  for (const x of b) {
    if (x !== 0) return z + Math.clz32(x) - 24;
    z += 8;
  }
  return z;
}

onmessage = async (ev) => {
  const { challenge, difficulty } = ev.data;
  const enc = new TextEncoder();
  for (let n = 0; ; n += batch) {
    // Digests run concurrently: one at a time leaves WebCrypto idle.
    const sums = await Promise.all(Array.from({ length: batch }, (_, i) =>
      crypto.subtle.digest("SHA-256", enc.encode(`${challenge}:${n + i}`))));
    const hit = sums.findIndex((s) => zeros(new Uint8Array(s)) >= difficulty);
    if (hit >= 0) {
      postMessage({ nonce: String(n + hit), tried: n + hit + 1 });
      return;
    }
    postMessage({ tried: n + batch });
  }
};
