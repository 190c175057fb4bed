import t from 'tap';
import { ensureBuilt, runCli } from '../helpers/cli-process.js';

/**
 * A mistyped or misused option gets one line that names it and what was
 * meant, then the usage, exit 2: never Node's parseArgs message about
 * positionals and `--`.
 */
ensureBuilt();
t.setTimeout(120_000);

const cases: Array<[string[], string]> = [
  [['--confg', 'gatehouse.yaml'], 'gatehouse: unknown option --confg; did you mean --config?'],
  [['check', '--conifg', 'gatehouse.yaml'], 'gatehouse: unknown option --conifg; did you mean --config?'],
  [['demo', '--upstrem', 'http://127.0.0.1:3000'], 'gatehouse: unknown option --upstrem; did you mean --upstream?'],
  [['check', '--Config', 'gatehouse.yaml'], 'gatehouse: unknown option --Config; did you mean --config?'],
  [['--verbose'], 'gatehouse: unknown option --verbose\n'],
  [['-x'], 'gatehouse: unknown option -x\n'],
  [['check', '--config'], 'gatehouse: --config needs a value: --config FILE'],
  [['check', '--config='], 'gatehouse: --config needs a value: --config FILE'],
  [['demo', '--upstream', '--config', 'x.yaml'], 'gatehouse: --upstream needs a value: --upstream URL'],
  [['--version=yes'], 'gatehouse: --version takes no value'],
];

for (const [args, message] of cases) {
  t.test(`gatehouse ${args.join(' ')}`, async (t) => {
    const result = await runCli(args);
    t.equal(result.code, 2);
    t.ok(result.stderr.startsWith(message), `stderr starts with: ${message.trim()}\n got: ${result.stderr.split('\n')[0]}`);
    t.match(result.stderr, /Usage:\n/, 'then the usage');
    t.notMatch(result.stderr, /positional argument|ERR_PARSE_ARGS|To specify/, "not parseArgs's own message");
  });
}

t.test('the options still work when spelled right', async (t) => {
  const version = await runCli(['-v']);
  t.equal(version.code, 0);
  const check = await runCli(['check', '--config=does-not-exist.yaml']);
  t.equal(check.code, 1);
  t.match(check.stderr, 'config file does-not-exist.yaml: cannot be read (ENOENT)');
});
