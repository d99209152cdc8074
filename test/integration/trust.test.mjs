// Workspace trust as root: a project policy asking for network and programs
// gets neither until --trust, and again nothing after one byte changes.
// (The cases live in trust_lib.mjs; trust_nobody.test.mjs runs them as nobody.)
import { trustCycle } from './trust_lib.mjs';

trustCycle('root');
