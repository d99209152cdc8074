// Workspace trust as nobody (setpriv), with a store owned by nobody: the same
// cases as trust.test.mjs (see trust_lib.mjs).
import { trustCycle } from './trust_lib.mjs';

trustCycle('nobody');
