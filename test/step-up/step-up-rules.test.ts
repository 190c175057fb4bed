import t from 'tap';
import { combineStepUp, meetsStepUp, parseStepUp, stepUpChallenge, stepUpParameters, stepUpQuery, upstreamStepUp } from '../../src/oauth/step-up.js';

/** README "Step-up": the pure rules (src/oauth/step-up.ts). */
const NOW = 1_800_000_000_000;

t.test('meetsStepUp: acr in the list, auth_time at most maxAge old; a missing claim never meets', async (t) => {
  t.ok(meetsStepUp({ acr: ['mfa', 'hwk'] }, { acr: 'hwk' }, NOW));
  t.notOk(meetsStepUp({ acr: ['mfa'] }, { acr: 'pwd' }, NOW));
  t.notOk(meetsStepUp({ acr: ['mfa'] }, {}, NOW));
  t.ok(meetsStepUp({ maxAge: 60 }, { authTime: NOW / 1000 - 60 }, NOW), 'exactly maxAge old passes');
  t.notOk(meetsStepUp({ maxAge: 60 }, { authTime: NOW / 1000 - 61 }, NOW));
  t.notOk(meetsStepUp({ maxAge: 60 }, { acr: 'mfa' }, NOW), 'no auth_time');
  t.notOk(meetsStepUp({ acr: ['mfa'], maxAge: 60 }, { acr: 'mfa', authTime: NOW / 1000 - 120 }, NOW), 'both must hold');
  t.ok(meetsStepUp({}, {}, NOW), 'an empty requirement asks nothing');
});

t.test('what the AS is asked, the link and the challenge', async (t) => {
  t.strictSame(stepUpParameters({ acr: ['mfa', 'hwk'], maxAge: 600 }), { acr_values: 'mfa hwk', max_age: '600', prompt: 'login' });
  t.strictSame(stepUpParameters({ acr: ['mfa'] }), { acr_values: 'mfa' }, 'no prompt without maxAge');
  t.equal(stepUpQuery({ acr: ['urn:x:mfa', 'hwk'], maxAge: 5 }), '&acr_values=urn%3Ax%3Amfa%20hwk&max_age=5');
  t.equal(stepUpQuery({}), '');
  t.equal(
    stepUpChallenge({ acr: ['mfa', 'hwk'], maxAge: 600 }),
    'Bearer error="insufficient_user_authentication", error_description="A stronger or more recent sign-in is required", acr_values="mfa hwk", max_age=600',
  );
});

t.test('parseStepUp: what a link may carry; anything malformed is invalid', async (t) => {
  t.equal(parseStepUp(undefined, undefined), undefined);
  t.strictSame(parseStepUp('mfa  hwk', '30'), { acr: ['mfa', 'hwk'], maxAge: 30 });
  for (const [acr, age] of [['', undefined], [['a', 'b'], undefined], ['"a"', undefined], ['a\\b', undefined], [undefined, '-1'], [undefined, '1e3'], [undefined, ['1']], ['a '.repeat(11), undefined], [undefined, '99999999999']] as const) {
    t.equal(parseStepUp(acr, age), 'invalid', JSON.stringify([acr, age]));
  }
});

t.test('combineStepUp: the smaller maxAge, the shared acr values, never weaker than the route', async (t) => {
  t.strictSame(combineStepUp({ acr: ['mfa', 'hwk'], maxAge: 600 }, { acr: ['hwk'], maxAge: 60 }), { acr: ['hwk'], maxAge: 60 });
  t.strictSame(combineStepUp({ acr: ['mfa'] }, { acr: ['pwd'] }), { acr: ['mfa'] }, 'nothing shared: the route stands');
  t.strictSame(combineStepUp({ maxAge: 60 }, { acr: ['mfa'], maxAge: 600 }), { acr: ['mfa'], maxAge: 60 });
  t.strictSame(combineStepUp(undefined, { maxAge: 5 }), { maxAge: 5 });
  t.equal(combineStepUp(undefined, undefined), undefined);
});

t.test('upstreamStepUp reads an RFC 9470 challenge and nothing else', async (t) => {
  t.strictSame(upstreamStepUp('Bearer error="insufficient_user_authentication", error_description="more", acr_values="mfa hwk", max_age=5'), { acr: ['mfa', 'hwk'], maxAge: 5 });
  t.strictSame(upstreamStepUp('Bearer realm="api", error="insufficient_user_authentication", max_age="30"'), { maxAge: 30 }, 'quoted max_age');
  t.strictSame(upstreamStepUp('DPoP algs="ES256", Bearer error="insufficient_user_authentication", acr_values="mfa"'), { acr: ['mfa'] }, 'the Bearer challenge among others');
  t.strictSame(upstreamStepUp(['Basic realm="x"', 'bearer error=insufficient_user_authentication, acr_values=mfa']), { acr: ['mfa'] }, 'second header, token values');
  t.equal(upstreamStepUp('Bearer error="invalid_token", acr_values="mfa"'), undefined, 'another error');
  t.equal(upstreamStepUp('Bearer error="insufficient_user_authentication"'), undefined, 'nothing to ask for');
  t.equal(upstreamStepUp('DPoP error="insufficient_user_authentication", max_age=5'), undefined, 'not the Bearer scheme');
  t.equal(upstreamStepUp('Bearer error="insufficient_user_authentication", max_age=soon'), undefined, 'malformed');
  t.equal(upstreamStepUp('Bearer error="insufficient_user_authentication", acr_values="a\\"b"'), undefined, 'an acr value with a quote');
  t.equal(upstreamStepUp(undefined), undefined);
  t.equal(upstreamStepUp('Bearer ,,, = "'), undefined, 'garbage');
});
