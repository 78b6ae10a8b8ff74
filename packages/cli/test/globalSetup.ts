/**
 * Builds the CLI (and the packages it uses) once for the run, incrementally, so that the tests run
 * `dist/bin.js` as a user's `npx effect-idempotency` would.
 */
import { execFileSync } from "node:child_process"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export default function setup() {
  const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
  execFileSync(process.execPath, [tsc, "-b", path.join(dir, "tsconfig.src.json")], {
    stdio: "inherit",
    timeout: 300_000
  })
}
