// The conformance package imports fs.globSync (Node 22); on Node 20 its one use (a report
// over result files) gets this small stand-in. Loaded with `node --import ./node20.mjs`.
import { register } from "node:module";

register("./node20-hooks.mjs", import.meta.url);
