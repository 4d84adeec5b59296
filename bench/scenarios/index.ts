/** Every scenario `npm run bench` knows, in the order `--list` shows them and the headline runs them. */
import type { Scenario } from '../lib/scenario.js';
import { ab } from './ab.js';
import { halfLoad } from './half-load.js';
import { heldStreams } from './held-streams.js';
import { profile } from './profile.js';
import { refusals } from './refusals.js';
import { relayDbLoad } from './relay-db-load.js';
import { scan } from './scan.js';
import { sse } from './sse.js';
import { throughput } from './throughput.js';
import { wrongKeys } from './wrong-keys.js';

export const SCENARIOS: readonly Scenario[] = [throughput, halfLoad, sse, heldStreams, scan, refusals, wrongKeys, relayDbLoad, ab, profile];
