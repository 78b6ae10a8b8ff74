import * as effectEslint from "@effect/eslint-plugin"
import js from "@eslint/js"
import { builtinModules } from "node:module"
import tseslint from "typescript-eslint"

export default tseslint.config(
  {
    ignores: ["**/dist", "**/build", "**/node_modules", "**/*.md", "**/.pglite-data"]
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  ...effectEslint.configs.dprint,
  {
    languageOptions: {
      parser: tseslint.parser,
      ecmaVersion: 2022,
      sourceType: "module"
    },
    rules: {
      "no-fallthrough": "off",
      "no-irregular-whitespace": "off",
      "object-shorthand": "error",
      "prefer-destructuring": "off",
      "sort-imports": "off",
      "no-unused-vars": "off",
      "require-yield": "off",
      "prefer-rest-params": "off",
      "prefer-spread": "off",
      "@typescript-eslint/array-type": ["error", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-empty-object-type": "off",
      "@typescript-eslint/no-unsafe-function-type": "off",
      "@typescript-eslint/no-wrapper-object-types": "off",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/ban-ts-comment": "off",
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/no-use-before-define": "off",
      "@effect/dprint": [
        "error",
        {
          config: {
            indentWidth: 2,
            lineWidth: 120,
            semiColons: "asi",
            quoteStyle: "alwaysDouble",
            trailingCommas: "never",
            operatorPosition: "maintain",
            "arrowFunction.useParentheses": "force"
          }
        }
      ]
    }
  },
  {
    files: ["packages/*/src/**/*"],
    rules: {
      "no-console": "error",
      "@typescript-eslint/no-explicit-any": "error"
    }
  },
  {
    // the core runs wherever Effect runs (Deno, Bun, browsers, Cloudflare Workers): no Node built-ins
    files: ["packages/core/src/**/*"],
    rules: {
      "no-restricted-imports": ["error", {
        patterns: [{
          group: ["node:*", ...builtinModules.filter((name) => !name.startsWith("_"))],
          message:
            "The core is platform-neutral: use Web APIs (globalThis.crypto, TextEncoder) or Effect, not Node's modules."
        }]
      }]
    }
  }
)
