import t from 'tap';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readFileSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { StdoutLog } from '../../src/stdout-log.js';

/**
 * A log reader that stops reading (a stalled log shipper) must not make the
 * gateway keep every line in memory: src/stdout-log.ts keeps at most 8 MiB
 * waiting and says how many lines it dropped once the reader is back.
 */
t.test('a reader that does not read: what waits stays bounded, and the dropped lines are counted once it reads again', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-stdout-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const fifo = join(dir, 'log');
  execFileSync('mkfifo', [fifo]);
  // Opened for reading and writing, the FIFO always has a reader (this test), which reads only when it wants to.
  const fd = openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK);
  t.teardown(() => closeSync(fd));
  const log = new StdoutLog(fd);

  const line = `${JSON.stringify({ level: 30, msg: 'x'.repeat(1000) })}\n`;
  const lines = 20_000;
  for (let i = 0; i < lines; i++) log.write(line);
  await sleep(300);
  t.ok(log.waiting <= 8 * 1024 * 1024 + line.length, `at most 8 MiB waits for the reader (${log.waiting} bytes)`);

  const buffer = Buffer.alloc(1 << 20);
  let received = '';
  const deadline = Date.now() + 20_000;
  while (!received.includes('log lines dropped') && Date.now() < deadline) {
    try {
      const n = readSync(fd, buffer, 0, buffer.length, null);
      received += buffer.toString('utf8', 0, n);
      if (received.length > 4096) received = received.slice(-4096);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      await sleep(5);
    }
    log.flush();
  }
  const notice = received.split('\n').find((l) => l.includes('log lines dropped'));
  t.ok(notice, 'a warning line says lines were dropped');
  const parsed = JSON.parse(notice!) as { level: number; msg: string };
  t.equal(parsed.level, 40, 'at the warn level');
  const count = Number(parsed.msg.split(' ')[0]);
  t.ok(count > 0 && count < lines, `it counts the dropped lines (${count} of ${lines})`);
});

/**
 * Lines are copied into 64 KiB byte blocks as they are logged: every line
 * must come out whole and in order, whatever its characters (UTF-8 up to 4
 * bytes per character) and whether it is longer than a block.
 */
t.test('every line is written whole and in order: multi-byte characters, block boundaries, a line longer than a block', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-stdout-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'log');
  const fd = openSync(file, 'w');
  t.teardown(() => closeSync(fd));
  const log = new StdoutLog(fd);

  const lines: string[] = [];
  for (let i = 0; i < 3000; i++) lines.push(`${JSON.stringify({ level: 30, i, msg: `é€😀 ${'ü'.repeat(i % 97)}` })}\n`);
  lines.splice(1500, 0, `${JSON.stringify({ level: 30, msg: 'ж'.repeat(100_000) })}\n`);
  for (const line of lines) log.write(line);
  await new Promise<void>((resolve) => log.flush(() => resolve()));
  t.equal(log.waiting, 0, 'nothing waits once flush has called back');
  t.equal(readFileSync(file, 'utf8'), lines.join(''), `the file holds the ${lines.length} lines, byte for byte`);
});
