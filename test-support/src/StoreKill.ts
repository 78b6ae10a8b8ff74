/**
 * The transactional mode's process killed (SIGKILL) at every point of its transaction, then a retry,
 * for `PgTransactional` and for `SqlTransactional`: the user's rows and the record are both there
 * exactly once (the retry replays) or both absent (the retry executes once), counted from the
 * database. The child runs `Children.killOrder` and stops at the point it is given.
 */
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"
import * as Children from "./Children.js"
import type * as TransactionalSuite from "./TransactionalSuite.js"

/** The points of its transaction the child stops at, and whether its run committed there. */
export const points = [
  { point: "before-reserve", committed: false },
  { point: "after-first-statement", committed: false },
  { point: "before-commit", committed: false },
  { point: "after-commit", committed: true },
  { point: "none", committed: true }
] as const

const done = { orders: 2, records: 1, status: "COMPLETED" }

/** What a package gives the suite. */
export interface Mode<R> {
  /** The child's file. */
  readonly child: string
  /** The child's arguments for a key and a point. */
  readonly args: (key: string, point: string) => Effect.Effect<ReadonlyArray<string>, never, R>
  /** The key's order rows and its records. */
  readonly counts: (key: string) => Effect.Effect<TransactionalSuite.Counts, unknown, R>
  /** The retry in this process: the mode's run of `Children.killOrder(orders, key, { started })`. */
  readonly retry: (
    key: string,
    started: Effect.Effect<void>
  ) => Effect.Effect<{ readonly replayed: boolean }, unknown, R>
}

/** Registers a case a point under `name`, on `live`. */
export const suite = <R, E>(name: string, live: Layer.Layer<R, E>, mode: Mode<R>) =>
  layer(live, { excludeTestServices: true, timeout: "3 minutes" })(name, (it) => {
    for (const { committed, point } of points) {
      it.effect(`killed at ${point}: a retry ${committed ? "replays" : "executes once"}`, () =>
        Effect.gen(function*() {
          const key = randomUUID()
          // runs the child until it prints `PAUSED <point>` (or `DONE`), then kills it with SIGKILL
          const marker = yield* Children.runUntilMarker(mode.child, yield* mode.args(key, point))
          assert.include(marker, point === "none" ? "DONE" : `PAUSED ${point}`)
          // both or neither, before the retry
          assert.deepStrictEqual(yield* mode.counts(key), committed ? done : { orders: 0, records: 0, status: null })
          let executions = 0
          const again = yield* mode.retry(key, Effect.sync(() => void executions++))
          assert.deepStrictEqual(
            { replayed: again.replayed, executions },
            committed ? { replayed: true, executions: 0 } : { replayed: false, executions: 1 }
          )
          assert.deepStrictEqual(yield* mode.counts(key), done)
        }), { timeout: 60_000 })
    }
  })
