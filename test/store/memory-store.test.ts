import t from 'tap';
import { storeConformance } from './store-conformance.js';

/** README "Storage": the memory:// backend passes the store conformance suite. */
t.test('memory://', (t) => storeConformance(t, 'memory://', process.cwd()));
