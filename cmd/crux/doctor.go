package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// doctorCmd is crux doctor [--repair]: lists the records of the store that
// cannot be read (and the index entries naming them or naming nothing) and
// checks every tenant's receipt chain; with --repair it first removes, in
// one transaction, what store.Repair can remove, printing each removal. It
// opens the store itself, without a server, so that nothing else reads or
// writes it meanwhile (a server seeds and purges on opening). It returns a
// reportedError, for status 1, when problems remain.
func doctorCmd(ctx context.Context, args []string, stdout io.Writer, osenv *environment) (err error) {
	var repair bool
	s, pos, err := operatorFlags("doctor", args, osenv, func(fs *flag.FlagSet) {
		fs.BoolVar(&repair, "repair", false, "remove the unreadable facts and the index entries naming them")
	})
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("doctor takes no arguments, got %q", pos[0])
	}
	db, err := openExisting(s.dir, !repair)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
		}
	}()

	if repair {
		var removed []store.Problem
		if err := db.Update(ctx, func(tx store.Tx) error {
			var err error
			removed, err = store.Repair(tx)
			return err
		}); err != nil {
			return fmt.Errorf("repairing the store (nothing was removed): %w", err)
		}
		for _, p := range removed {
			fmt.Fprintf(stdout, "removed %s\n", p)
		}
		fmt.Fprintf(stdout, "removed %d %s\n", len(removed), plural(len(removed), "entry", "entries"))
	}

	var problems []store.Problem
	var chains []error
	if err := db.View(ctx, func(tx store.Tx) error {
		var err error
		if problems, err = store.Diagnose(tx); err != nil {
			return err
		}
		tenants, err := receipts.Tenants(tx)
		if err != nil {
			return err
		}
		for _, t := range tenants {
			err := receipts.VerifyStoredChain(tx, t)
			var ce *receipts.ChainError
			var re *store.CorruptRecordError
			if errors.As(err, &ce) || errors.As(err, &re) {
				chains = append(chains, err)
			} else if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	repairable := 0
	for _, p := range problems {
		fmt.Fprintln(stdout, p)
		if p.Repairable {
			repairable++
		}
	}
	for _, err := range chains {
		fmt.Fprintln(stdout, err)
	}
	n := len(problems) + len(chains)
	if n == 0 {
		fmt.Fprintln(stdout, "the store is clean: every record reads and every receipt chain links")
		return nil
	}
	fmt.Fprintf(stdout, "%d %s", n, plural(n, "problem", "problems"))
	if repairable > 0 {
		fmt.Fprintf(stdout, "; crux doctor --repair removes %d of them", repairable)
	}
	fmt.Fprintln(stdout)
	return &reportedError{}
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
