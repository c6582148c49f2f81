module github.com/crux-go/crux/bench/retrieval

go 1.26

replace github.com/crux-go/crux => ../..
