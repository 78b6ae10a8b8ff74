/**
 * The exhaustive checker of the reservation's state machine (`src/internal/reservation.ts`).
 *
 * It explores every sequence of what can happen to the reservations of one attempt, up to four
 * reservations: each answered by the store in any of the ways of `utils/ReservationModel.ts` (made,
 * a live conflict, completed, another fingerprint, an unknown outcome, an expired lease refused, a
 * failure, cut off by the deadline), the clock before or past the downstream's deadline when the
 * answer comes, and each wait on a conflict ending with another reservation allowed or not; with
 * and without `waitOnConflict`, a deadline, and time left for the downstream. At every answer it
 * checks the rules of the exit table for the reservation:
 *
 * - the attempt executes exactly when its last reservation was made, with that reservation's time;
 * - the answer follows from the store's last answer (`expectedOutcome`), with its details: what it
 *   is counted as, a refused takeover's timeout policy, a conflict's retry time, the store's own
 *   failure passed on whole;
 * - a conflict is waited on exactly when the operation waits on conflicts and the deadline has not
 *   passed, until its schedule (or the deadline) says no more; each wait allows one more reservation;
 * - a reservation cut off by the deadline is given back, by the attempt's deadline, and no other is;
 * - with no time left for the downstream, the store is never touched;
 * - every path ends in an answer, and nothing happens after it.
 *
 * `ReservationSpace.test.ts` runs the same sequences through the real engine and compares its store
 * calls and answers with the machine's.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Reservation from "../src/internal/reservation.js"
import type { StoreAnswer } from "./utils/ReservationModel.js"
import { config, expectedOutcome, LIVE_LEASE, outcomeOf, storeAnswers, storeEvent } from "./utils/ReservationModel.js"

const MAX_RESERVATIONS = 4
const UNTIL = 400
const DEADLINE = 500

interface Path {
  readonly reservations: number
  readonly waits: number
  readonly released: ReadonlyArray<number>
  /** Whether the last wait ended without another reservation allowed. */
  readonly declined: boolean
  /** The store's last event. */
  readonly event: Reservation.Event | undefined
  readonly last: { readonly answer: StoreAnswer; readonly sentAt: number; readonly now: number } | undefined
}

describe("the reservation's state machine", () => {
  it("keeps every rule of the exit table over every sequence of events up to the bound", () => {
    const violations: Array<string> = []
    const pairs = new Set<string>()
    const answers = new Map<string, number>()
    let states = 0
    let paths = 0

    for (const waits of [false, true]) {
      for (const deadline of [false, true]) {
        for (const timeoutMs of [1_000, 0]) {
          const cfg = config({
            waits,
            timeoutMs,
            until: deadline ? UNTIL : Infinity,
            deadline: deadline ? DEADLINE : Infinity
          })
          const name = JSON.stringify({ waits, deadline, timeoutMs })
          const rule = (ok: boolean, path: Path, what: string) => {
            if (!ok) violations.push(`${name} after ${JSON.stringify(path)}: ${what}`)
          }

          const explore = (step: Reservation.Step, path: Path): void => {
            const [state, command] = step
            states++
            switch (command._tag) {
              case "Answer": {
                paths++
                const answer = command.answer
                const outcome = outcomeOf(answer)
                answers.set(outcome, (answers.get(outcome) ?? 0) + 1)
                rule(state._tag === "Answered", path, `answered while ${state._tag}`)
                if (path.last === undefined) {
                  rule(timeoutMs <= 0, path, "answered without reserving")
                  rule(
                    answer._tag === "Fail" &&
                      JSON.stringify(Cause.squash(answer.cause)) ===
                        JSON.stringify({
                          operation: "reservation",
                          key: "k",
                          timeoutMillis: 0,
                          policy: "release",
                          replayed: false,
                          _tag: "DownstreamTimeout"
                        }),
                    path,
                    `no time left, answered ${outcome}`
                  )
                  return
                }
                rule(outcome === expectedOutcome(path.last.answer), path, `answered ${outcome}`)
                // the answer's details, as the exit table and the telemetry have them
                switch (answer._tag) {
                  case "Refused": {
                    const { error } = answer
                    rule(
                      answer.outcome === (error._tag === "DownstreamTimeout" ? "replayed" : error._tag),
                      path,
                      `counted as ${answer.outcome}`
                    )
                    if (error._tag === "DownstreamTimeout") {
                      rule(
                        error.replayed && error.policy === cfg.onTimeout && error.timeoutMillis === timeoutMs,
                        path,
                        "the refused takeover is not the operation's timeout, replayed"
                      )
                    }
                    if (error._tag === "IdempotencyConflict") {
                      rule(error.retryAfterMillis === LIVE_LEASE, path, `retry after ${error.retryAfterMillis} ms`)
                      // a conflict before the deadline, with waitOnConflict, is answered once the schedule says so
                      const waited = waits && path.last.now < cfg.until
                      rule(path.declined === waited, path, waited ? "a conflict not waited on" : "a wait not asked for")
                    }
                    break
                  }
                  case "Fail":
                    rule(
                      path.event?._tag === "StoreFailed" && path.event.cause === answer.cause,
                      path,
                      "not the store's own failure"
                    )
                    break
                  case "Replay":
                  case "Execute":
                    break
                }
                rule(
                  (answer._tag === "Execute") === (path.last.answer === "reserved"),
                  path,
                  "executed without the reservation made, or not after it"
                )
                if (answer._tag === "Execute") {
                  rule(answer.sentAt === path.last.sentAt, path, "not the reservation's time")
                }
                rule(
                  path.released.length === (path.last.answer === "cutOff" ? 1 : 0),
                  path,
                  "a cut-off reservation not given back, or another given back"
                )
                rule(path.released.every((until) => until === cfg.deadline), path, "given back past the deadline")
                rule(path.reservations <= (waits ? path.waits + 1 : 1), path, `${path.reservations} reservations`)
                for (const event of events) {
                  rule(
                    throws(() => Reservation.step(cfg, state, event)),
                    path,
                    `${event._tag} moved an answered attempt`
                  )
                }
                return
              }
              case "Reserve": {
                rule(timeoutMs > 0, path, "reserved with no time left")
                const sentAt = path.reservations * 100
                for (const answer of storeAnswers) {
                  if (answer === "cutOff" && !deadline) continue
                  for (const now of deadline ? [sentAt, UNTIL] : [sentAt]) {
                    const event = storeEvent(answer, sentAt, now)
                    pairs.add(`${state._tag}:${event._tag}`)
                    explore(Reservation.step(cfg, state, event), {
                      ...path,
                      reservations: path.reservations + 1,
                      last: { answer, sentAt, now },
                      declined: false,
                      event
                    })
                  }
                }
                return
              }
              case "Wait": {
                rule(waits, path, "waited without waitOnConflict")
                if (path.last?.answer !== "live") return rule(false, path, "waited without a conflict")
                rule(
                  command.until === cfg.until && path.last.now < cfg.until,
                  path,
                  "waited past the downstream's deadline"
                )
                for (const again of path.reservations < MAX_RESERVATIONS ? [true, false] : [false]) {
                  pairs.add(`${state._tag}:Waited`)
                  explore(Reservation.step(cfg, state, { _tag: "Waited", again }), {
                    ...path,
                    waits: path.waits + (again ? 1 : 0),
                    declined: !again
                  })
                }
                return
              }
              case "GiveBack": {
                pairs.add(`${state._tag}:GivenBack`)
                explore(Reservation.step(cfg, state, { _tag: "GivenBack" }), {
                  ...path,
                  released: [...path.released, command.until]
                })
                return
              }
            }
          }
          explore(Reservation.start(cfg), {
            reservations: 0,
            waits: 0,
            released: [],
            declined: false,
            event: undefined,
            last: undefined
          })
        }
      }
    }

    console.log(
      `reservation machine: ${states} states, ${paths} paths, ${pairs.size} (state, event) pairs, ` +
        `answers ${JSON.stringify(Object.fromEntries(answers))}`
    )
    assert.deepStrictEqual(violations.slice(0, 10), [], `${violations.length} violations`)
    // every event met the state it moves, and every answer was reached
    assert.deepStrictEqual([...pairs].sort(), [
      "GivingBack:GivenBack",
      "Reserving:StoreAnswered",
      "Reserving:StoreFailed",
      "Waiting:Waited"
    ])
    assert.deepStrictEqual([...answers.keys()].sort(), [
      "DownstreamTimeout",
      "IdempotencyConflict",
      "KeyReused",
      "StoreUnavailable",
      "executed",
      "replayed"
    ])
  })

  it("refuses an event its state does not expect", () => {
    const cfg = config({ waits: true, timeoutMs: 1_000, until: UNTIL, deadline: DEADLINE })
    const [reserving] = Reservation.start(cfg)
    assert.isTrue(throws(() => Reservation.step(cfg, reserving, { _tag: "Waited", again: true })))
    assert.isTrue(throws(() => Reservation.step(cfg, reserving, { _tag: "GivenBack" })))
    const [waiting] = Reservation.step(cfg, reserving, storeEvent("live", 0, 0))
    assert.strictEqual(waiting._tag, "Waiting")
    assert.isTrue(throws(() => Reservation.step(cfg, waiting, storeEvent("reserved", 0, 0))))
  })
})

const events: ReadonlyArray<Reservation.Event> = [
  storeEvent("reserved", 0, 0),
  storeEvent("failed", 0, 0),
  { _tag: "Waited", again: true },
  { _tag: "GivenBack" }
]

const throws = (f: () => unknown): boolean => {
  try {
    f()
    return false
  } catch {
    return true
  }
}
