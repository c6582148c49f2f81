// Package receipttest gives tests a passport's standing without minting
// its receipts one call at a time.
package receipttest

import (
	"time"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// Earn appends, in tx, n decision receipts of tenant naming actor, spread
// over as many UTC days up to at as their credit needs (see
// receipts.DailyCredit): n mod DailyCredit of them (or DailyCredit) on
// at's day, DailyCredit on each day before, oldest first. They earn actor
// a credit of n, when nothing else names it on those days.
func Earn(tx store.Tx, s receipts.Signer, tenant, actor string, n int, at time.Time) error {
	last := n % receipts.DailyCredit // on at's day
	if last == 0 {
		last = receipts.DailyCredit
	}
	for i := range n {
		back := 0 // days before at
		if left := n - i; left > last {
			back = (left - last + receipts.DailyCredit - 1) / receipts.DailyCredit
		}
		if _, err := receipts.Append(tx, s, tenant, "decision", actor, map[string]int{"n": i}, at.AddDate(0, 0, -back)); err != nil {
			return err
		}
	}
	return nil
}
