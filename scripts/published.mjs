/**
 * The published packages (folders of `packages/`), in the order the scripts build, pack and document
 * them: the consumer test and the API reference read this one list.
 */
export const published = [
  "core",
  "sql",
  "sql-pg",
  "dynamodb",
  "redis",
  "http",
  "platform",
  "netlify",
  "lambda",
  "testing",
  "cli",
  "workflow",
  "queue"
]
