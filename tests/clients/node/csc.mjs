// node-redis's client-side cache against a server on the port given: a second GET is a cache
// hit (no command reaches the server), and another client's write invalidates the entry so
// the next GET returns the new value. Exits non-zero on any failure.
import { createClient, BasicClientSideCache } from 'redis';
import assert from 'node:assert/strict';

const port = Number(process.argv[2]);
const cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0 });
const cached = createClient({ RESP: 3, clientSideCache: cache, socket: { port, host: '127.0.0.1' } });
const other = createClient({ socket: { port, host: '127.0.0.1' } });
await cached.connect();
await other.connect();

await other.set('node:csc', 'v1');
assert.equal(await cached.get('node:csc'), 'v1');
const misses = cache.stats().missCount;
assert.equal(await cached.get('node:csc'), 'v1');
assert.equal(cache.stats().hitCount, 1, 'second GET served from the cache');
assert.equal(cache.stats().missCount, misses);

await other.set('node:csc', 'v2');
const deadline = Date.now() + 2000;
let value;
while ((value = await cached.get('node:csc')) !== 'v2') {
  assert.ok(Date.now() < deadline, `invalidation never arrived (still ${value})`);
  await new Promise((r) => setTimeout(r, 10));
}
assert.ok(cache.stats().invalidateCount >= 1 || cache.stats().missCount > misses);
await cached.quit();
await other.quit();
console.log('node-redis client-side cache: hit and invalidation ok');
