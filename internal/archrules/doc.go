// Package archrules holds no code: its test checks the rules of
// docs/ARCHITECTURE.md against the source tree, so that a change that
// breaks the one-way data flow fails `make test` instead of a review.
package archrules
