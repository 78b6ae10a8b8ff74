import type { AttributeValue } from "@aws-sdk/client-dynamodb"
import type { IdempotencyAdmin, IdempotencyRecord } from "@effect-idempotency/core"
import type { Compiled, Expr } from "./expression.js"
import { and, compile, expr, name, num, or, param, projection, str, update } from "./expression.js"
import type { Names } from "./item.js"
import { Attribute as A } from "./item.js"

/** @internal */
export const S = (s: string): AttributeValue => ({ S: s })

/** @internal */
export const N = (n: number): AttributeValue => ({ N: String(n) })

/**
 * Every request's expressions, compiled once per table (README.md#how-each-method-maps-to-dynamodb).
 *
 * @internal
 */
export interface Statements {
  readonly claim: {
    readonly takeover: Compiled<"now" | "token" | "fingerprint" | "leaseUntil" | "expiresAt" | "ttl">
    readonly noTakeover: Compiled<"now" | "token" | "fingerprint" | "leaseUntil" | "expiresAt" | "ttl">
  }
  /** Reserve's first write: a fresh record where there is none or only an expired one. */
  readonly recreate: Compiled<"now">
  readonly complete: Compiled<"now" | "token" | "kind" | "body" | "expiresAt" | "ttl">
  readonly markFailed: Compiled<"now" | "token" | "expiresAt" | "ttl">
  readonly release: Compiled<"now" | "token">
  readonly extendLease: Compiled<"now" | "token" | "leaseUntil">
  readonly extendExpiry: Compiled<"now" | "token" | "leaseUntil" | "ttl">
  readonly purgeScan: Compiled<"now">
  readonly purgeDelete: Compiled<"now">
  readonly adminList: (filter: {
    readonly state: IdempotencyAdmin.State | undefined
    readonly operation: boolean
    readonly olderThan: boolean
  }) => Compiled<"now" | "prefix" | "leaseEndedBy">
  readonly adminStats: Compiled<"now">
  /** `IdempotencyAdmin.unblockable`, fenced on `:attempt`. */
  readonly adminUnblock: Compiled<"now" | "attempt">
}

const STATES: ReadonlyArray<IdempotencyAdmin.State> = ["running", "stuck", "completed", "unknown", "omitted", "failed"]

/** @internal */
export const make = (names: Names): Statements => {
  const absent = expr`attribute_not_exists(${name(names.key)})`
  const live = expr`${name(A.expiresAt)} > ${param("now")}`
  const expired = expr`${name(A.expiresAt)} <= ${param("now")}`
  const status = (value: IdempotencyRecord.Status) => expr`${name(A.status)} = ${str(value)}`
  const leaseEnded = expr`${name(A.leaseUntil)} <= ${param("now")}`
  const outcomeKind = (kind: IdempotencyRecord.OutcomeKind) => expr`${name(A.outcomeKind)} = ${str(kind)}`

  /** The fencing condition of every write after reserve. */
  const owned = and(status("IN_PROGRESS"), expr`${name(A.token)} = ${param("token")}`, live)

  /** `IdempotencyRecord.canTakeOver` on a live record, or no record at all. */
  const reservable = (takeover: boolean) => {
    const failed = status("FAILED")
    const lapsed = and(status("IN_PROGRESS"), leaseEnded)
    return or(
      absent,
      and(live, expr`${name(A.fingerprint)} = ${param("fingerprint")}`, takeover ? or(failed, lapsed) : failed)
    )
  }
  const claim = update({
    set: [
      [A.status, str("IN_PROGRESS")],
      [A.token, param("token")],
      [A.fingerprint, param("fingerprint")],
      [A.leaseUntil, param("leaseUntil")],
      [A.expiresAt, param("expiresAt")],
      [names.ttl, param("ttl")],
      [A.attempt, expr`if_not_exists(${name(A.attempt)}, ${num(0)}) + ${num(1)}`]
    ],
    remove: [A.outcomeKind, A.outcomeBody]
  })

  /** `IdempotencyAdmin.stateOf`, as a condition on an item. */
  const state = {
    running: and(status("IN_PROGRESS"), expr`${name(A.leaseUntil)} > ${param("now")}`),
    stuck: and(status("IN_PROGRESS"), leaseEnded),
    completed: and(
      status("COMPLETED"),
      or(
        expr`attribute_not_exists(${name(A.outcomeKind)})`,
        and(expr`${name(A.outcomeKind)} <> ${str("Timeout")}`, expr`${name(A.outcomeKind)} <> ${str("Omitted")}`)
      )
    ),
    unknown: and(status("COMPLETED"), outcomeKind("Timeout")),
    omitted: and(status("COMPLETED"), outcomeKind("Omitted")),
    failed: status("FAILED")
  } satisfies Record<IdempotencyAdmin.State, unknown>
  const adminList = new Map<string, Compiled<"now" | "prefix" | "leaseEndedBy">>()
  const listKey = (filter: Parameters<Statements["adminList"]>[0]) =>
    `${filter.state ?? ""}/${filter.operation}/${filter.olderThan}`
  for (const s of [undefined, ...STATES]) {
    for (const operation of [false, true]) {
      for (const olderThan of [false, true]) {
        const conditions: Array<Expr<string>> = [live]
        if (s !== undefined) conditions.push(state[s])
        if (operation) conditions.push(expr`begins_with(${name(names.key)}, ${param("prefix")})`)
        if (olderThan) conditions.push(expr`${name(A.leaseUntil)} <= ${param("leaseEndedBy")}`)
        adminList.set(listKey({ state: s, operation, olderThan }), compile({ filter: and(...conditions) }))
      }
    }
  }

  return {
    claim: {
      takeover: compile({ condition: reservable(true), update: claim }),
      noTakeover: compile({ condition: reservable(false), update: claim })
    },
    recreate: compile({ condition: or(absent, expired) }),
    complete: compile({
      condition: owned,
      update: update({
        set: [
          [A.status, str("COMPLETED")],
          [A.outcomeKind, param("kind")],
          [A.outcomeBody, param("body")],
          [A.expiresAt, param("expiresAt")],
          [names.ttl, param("ttl")]
        ]
      })
    }),
    markFailed: compile({
      condition: owned,
      update: update({
        set: [[A.status, str("FAILED")], [A.expiresAt, param("expiresAt")], [names.ttl, param("ttl")]]
      })
    }),
    release: compile({ condition: owned }),
    extendLease: compile({ condition: owned, update: update({ set: [[A.leaseUntil, param("leaseUntil")]] }) }),
    extendExpiry: compile({
      condition: and(owned, expr`${name(A.expiresAt)} < ${param("leaseUntil")}`),
      update: update({ set: [[A.expiresAt, param("leaseUntil")], [names.ttl, param("ttl")]] })
    }),
    purgeScan: compile({ filter: expired, projection: projection([names.key, A.expiresAt]) }),
    purgeDelete: compile({ condition: expired }),
    adminList: (filter) => adminList.get(listKey(filter))!,
    adminStats: compile({
      filter: live,
      projection: projection([
        names.key,
        A.status,
        A.token,
        A.fingerprint,
        A.attempt,
        A.leaseUntil,
        A.expiresAt,
        A.outcomeKind
      ])
    }),
    adminUnblock: compile({
      condition: and(
        live,
        expr`${name(A.attempt)} = ${param("attempt")}`,
        or(state.stuck, state.unknown, state.failed)
      )
    })
  }
}
