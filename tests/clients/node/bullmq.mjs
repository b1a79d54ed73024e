// BullMQ (Lua scripts, lists, sorted sets, streams for its events) against a server: three
// workers with five jobs in flight each; every seventh job fails its first attempt and is
// retried after a backoff, every tenth is delayed. Prints a JSON summary; exits 0 only when
// every job completed exactly once.
//   node bullmq.mjs PORT [JOBS]
import { Queue, Worker } from 'bullmq';

const port = parseInt(process.argv[2], 10);
const jobs = parseInt(process.argv[3] || '300', 10);
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const queue = new Queue('darner-test', { connection });
await queue.obliterate({ force: true });
const completions = new Map();
const failedOnce = new Set();
const workers = [];
for (let w = 0; w < 3; w++) {
  workers.push(new Worker('darner-test', async (job) => {
    const { i, failFirst } = job.data;
    if (failFirst && !failedOnce.has(i)) {
      failedOnce.add(i);
      throw new Error('the first attempt fails');
    }
    completions.set(i, (completions.get(i) || 0) + 1);
    return i * 2;
  }, { connection, concurrency: 5 }));
}
const started = Date.now();
for (let i = 0; i < jobs; i++) {
  const opts = { attempts: 3, backoff: { type: 'fixed', delay: 50 } };
  if (i % 10 === 0) opts.delay = 200;
  await queue.add('job', { i, failFirst: i % 7 === 0 }, opts);
}
while (completions.size < jobs && Date.now() - started < 60000) {
  await new Promise((r) => setTimeout(r, 50));
}
// Let a duplicate completion, if there were one, show up.
await new Promise((r) => setTimeout(r, 300));
const counts = await queue.getJobCounts('completed', 'failed', 'waiting', 'delayed', 'active');
const twice = [...completions.values()].filter((c) => c !== 1).length;
const retried = failedOnce.size;
console.log(JSON.stringify({ jobs, completed: completions.size, twice, retried, counts,
  ms: Date.now() - started }));
for (const w of workers) await w.close();
await queue.close();
const ok = completions.size === jobs && twice === 0 && counts.completed === jobs &&
  counts.failed === 0 && counts.waiting === 0 && counts.delayed === 0 && counts.active === 0;
process.exit(ok ? 0 : 1);
