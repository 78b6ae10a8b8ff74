/**
 * The Lua scripts of the store, one per method, exported for review, for tools that read records,
 * and to preload them (`SCRIPT LOAD`). The record's format is in README.md#data-layout; every
 * script takes the record's key as `KEYS[1]` and the caller's time as `ARGV[1]` (`''`: `TIME`).
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"

/**
 * A Lua script and its SHA1 digest, the name `EVALSHA` calls it by.
 *
 * @since 0.1.0
 * @category models
 */
export interface Script {
  readonly name: string
  readonly lua: string
  readonly sha: string
}

const script = (name: string, lua: string): Script => ({
  name,
  lua,
  sha: createHash("sha1").update(lua).digest("hex")
})

// The clock and the record's encoding (README.md#data-layout); native expiry is `PXAT` at
// `expires_at - now + server` (README.md#time).
const prelude = `
local time = redis.call('TIME')
local server = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local now = server
if ARGV[1] ~= '' then now = tonumber(ARGV[1]) end

local function int(n)
  return string.format('%.0f', n)
end

local function decode(value)
  local header, status, attempt, leaseUntil, expiresAt, kind, tokenBytes, fingerprintBytes =
    string.match(value, '^(v1 (%S+) (%d+) (%d+) (%d+) (%S+) (%d+) (%d+)\\n)')
  if header == nil then
    error('not an idempotency record: ' .. KEYS[1])
  end
  local tokenStart = #header + 1
  local fingerprintStart = tokenStart + tonumber(tokenBytes)
  local outcomeStart = fingerprintStart + tonumber(fingerprintBytes)
  return {
    status = status,
    attempt = tonumber(attempt),
    leaseUntil = tonumber(leaseUntil),
    expiresAt = tonumber(expiresAt),
    kind = kind,
    token = string.sub(value, tokenStart, fingerprintStart - 1),
    fingerprint = string.sub(value, fingerprintStart, outcomeStart - 1),
    outcomeStart = outcomeStart
  }
end

local function outcome(value, record)
  if record.kind == '-' then
    return ''
  end
  return string.sub(value, record.outcomeStart)
end

local function write(status, attempt, leaseUntil, expiresAt, kind, token, fingerprint, body)
  local value = 'v1 ' .. status .. ' ' .. int(attempt) .. ' ' .. int(leaseUntil) .. ' ' .. int(expiresAt) .. ' ' ..
    kind .. ' ' .. #token .. ' ' .. #fingerprint .. '\\n' .. token .. fingerprint .. body
  redis.call('SET', KEYS[1], value, 'PXAT', int(expiresAt - now + server))
end

local function owned(token)
  local value = redis.call('GET', KEYS[1])
  if not value then
    return nil
  end
  local record = decode(value)
  if record.status ~= 'IN_PROGRESS' or record.token ~= token or record.expiresAt <= now then
    return nil
  end
  return record
end
`

/**
 * `ARGV`: now, token, fingerprint, lease ms, ttl ms, takeover (`'1'`/`'0'`). Returns
 * `{1, attempt, lease_until, expires_at}`, or `{0, status, token, fingerprint, attempt,
 * lease_until, expires_at, now, kind, outcome}`.
 *
 * @since 0.1.0
 * @category scripts
 */
export const reserve = script(
  "reserve",
  prelude + `
local lease = tonumber(ARGV[4])
local attempt = 1
local value = redis.call('GET', KEYS[1])
if value then
  local record = decode(value)
  if record.expiresAt > now then
    local takeover = record.fingerprint == ARGV[3] and (record.status == 'FAILED' or
      (record.status == 'IN_PROGRESS' and ARGV[6] == '1' and record.leaseUntil <= now))
    if not takeover then
      return {0, record.status, record.token, record.fingerprint, record.attempt, record.leaseUntil,
        record.expiresAt, now, record.kind, outcome(value, record)}
    end
    attempt = record.attempt + 1
  end
end
local leaseUntil = now + lease
local expiresAt = now + math.max(lease, tonumber(ARGV[5]))
write('IN_PROGRESS', attempt, leaseUntil, expiresAt, '-', ARGV[2], ARGV[3], '')
return {1, attempt, leaseUntil, expiresAt}
`
)

/**
 * `ARGV`: now, token, outcome kind, outcome, ttl ms. Returns 1, or 0 when the token does not hold it.
 *
 * @since 0.1.0
 * @category scripts
 */
export const complete = script(
  "complete",
  prelude + `
local record = owned(ARGV[2])
if not record then
  return 0
end
write('COMPLETED', record.attempt, record.leaseUntil, now + tonumber(ARGV[5]), ARGV[3], record.token,
  record.fingerprint, ARGV[4])
return 1
`
)

/**
 * `ARGV`: now, token. Returns 1, or 0 when the token does not hold it.
 *
 * @since 0.1.0
 * @category scripts
 */
export const release = script(
  "release",
  prelude + `
if not owned(ARGV[2]) then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`
)

/**
 * `ARGV`: now, token, ttl ms. Returns 1, or 0 when the token does not hold it.
 *
 * @since 0.1.0
 * @category scripts
 */
export const markFailed = script(
  "markFailed",
  prelude + `
local record = owned(ARGV[2])
if not record then
  return 0
end
write('FAILED', record.attempt, record.leaseUntil, now + tonumber(ARGV[3]), '-', record.token,
  record.fingerprint, '')
return 1
`
)

/**
 * `ARGV`: now, token, lease ms. Returns 1, or 0 when the token does not hold it.
 *
 * @since 0.1.0
 * @category scripts
 */
export const extend = script(
  "extend",
  prelude + `
local record = owned(ARGV[2])
if not record then
  return 0
end
local leaseUntil = now + tonumber(ARGV[3])
write('IN_PROGRESS', record.attempt, leaseUntil, math.max(record.expiresAt, leaseUntil), '-', record.token,
  record.fingerprint, '')
return 1
`
)

/**
 * `ARGV`: now. Returns `{status, token, fingerprint, attempt, lease_until, expires_at, kind, outcome}`, or `{}`.
 *
 * @since 0.1.0
 * @category scripts
 */
export const get = script(
  "get",
  prelude + `
local value = redis.call('GET', KEYS[1])
if not value then
  return {}
end
local record = decode(value)
if record.expiresAt <= now then
  return {}
end
return {record.status, record.token, record.fingerprint, record.attempt, record.leaseUntil, record.expiresAt,
  record.kind, outcome(value, record)}
`
)

/**
 * `ARGV`: now. Deletes an expired record, never a key of another format. Returns 1 when deleted.
 *
 * @since 0.1.0
 * @category scripts
 */
export const purge = script(
  "purge",
  prelude + `
local head = redis.pcall('GETRANGE', KEYS[1], 0, 127)
if type(head) ~= 'string' then
  return 0
end
local expiresAt = string.match(head, '^v1 %S+ %d+ %d+ (%d+) ')
if expiresAt == nil or tonumber(expiresAt) > now then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`
)

/**
 * `ARGV`: now, whole (`'0'`: the first line only). Returns `{now}`, or
 * `{now, status, attempt, lease_until, expires_at, kind, token, fingerprint, outcome}`.
 *
 * @since 0.1.0
 * @category scripts
 */
export const inspect = script(
  "inspect",
  prelude + `
if ARGV[2] ~= '1' then
  local head = redis.pcall('GETRANGE', KEYS[1], 0, 127)
  if type(head) ~= 'string' or head == '' then
    return {now}
  end
  local status, attempt, leaseUntil, expiresAt, kind = string.match(head, '^v1 (%S+) (%d+) (%d+) (%d+) (%S+) ')
  if status == nil then
    error('not an idempotency record: ' .. KEYS[1])
  end
  if tonumber(expiresAt) <= now then
    return {now}
  end
  return {now, status, tonumber(attempt), tonumber(leaseUntil), tonumber(expiresAt), kind, '', '', ''}
end
local value = redis.call('GET', KEYS[1])
if not value then
  return {now}
end
local record = decode(value)
if record.expiresAt <= now then
  return {now}
end
return {now, record.status, record.attempt, record.leaseUntil, record.expiresAt, record.kind, record.token,
  record.fingerprint, outcome(value, record)}
`
)

/**
 * `ARGV`: now, attempt. Returns `{'unblocked'}`, `{'absent'}` or `{reason, attempt}` (README.md#admin).
 *
 * @since 0.1.0
 * @category scripts
 */
export const unblock = script(
  "unblock",
  prelude + `
local value = redis.call('GET', KEYS[1])
if not value then
  return {'absent'}
end
local record = decode(value)
if record.expiresAt <= now then
  return {'absent'}
end
if record.attempt ~= tonumber(ARGV[2]) then
  return {'changed', record.attempt}
end
if record.status == 'IN_PROGRESS' and record.leaseUntil > now then
  return {'running', record.attempt}
end
if record.status == 'COMPLETED' and record.kind ~= 'Timeout' then
  if record.kind == 'Omitted' then
    return {'omitted', record.attempt}
  end
  return {'completed', record.attempt}
end
redis.call('DEL', KEYS[1])
return {'unblocked'}
`
)

/**
 * Every script of the store.
 *
 * @since 0.1.0
 * @category scripts
 */
export const all: ReadonlyArray<Script> = [reserve, complete, release, markFailed, extend, get, purge, inspect, unblock]
