/**
 * `@effect/vitest` inside the test Worker, where vitest cannot run: the bundle resolves the suites'
 * `import { assert, layer } from "@effect/vitest"` here. `assert` is chai's, the one vitest
 * re-exports, so the checks assert exactly as they do under vitest; `layer` registers vitest tests,
 * which the Worker never does (it runs the checks one by one).
 */
export { assert } from "chai"

export const layer = (): never => {
  throw new Error("@effect/vitest's layer registers vitest tests: the test Worker runs checks, not suites")
}
