import t from 'tap';
import { storeConformance } from './store-conformance.js';

/** SPEC §6: the memory:// backend passes the store conformance suite. */
t.test('memory://', (t) => storeConformance(t, 'memory://', process.cwd()));
