import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "testing",
      // added to the shared `test/**/*.test.ts`: the example users copy is a test file too
      include: ["examples/**/*.test.ts"]
    }
  })
)
