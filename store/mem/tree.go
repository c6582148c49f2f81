package mem

import (
	"bytes"
	"math/rand/v2"
)

// node is a node of an immutable treap: a binary search tree on key that
// is also a heap on prio (a parent's prio is at least its children's).
// Random priorities keep it balanced whatever order the keys come in, so
// every operation visits O(log n) nodes on average. A node is never
// modified once it is reachable from a published tree: an insert or a
// delete copies the nodes on its path and returns a new root, and every
// older root stays a complete, consistent tree (the snapshot a reader
// holds).
type node struct {
	key, val    []byte
	prio        uint64
	left, right *node
}

// get returns the node of key in the tree rooted at n, or nil.
func get(n *node, key []byte) *node {
	for n != nil {
		switch c := bytes.Compare(key, n.key); {
		case c < 0:
			n = n.left
		case c > 0:
			n = n.right
		default:
			return n
		}
	}
	return nil
}

// insert returns the root of the tree n with key set to val. The nodes
// it returns are all new, so a caller may change the links of the one it
// gets back (the rotations below do).
func insert(n *node, key, val []byte) *node {
	if n == nil {
		return &node{key: key, val: val, prio: rand.Uint64()}
	}
	m := *n
	switch c := bytes.Compare(key, n.key); {
	case c < 0:
		m.left = insert(n.left, key, val)
		if m.left.prio > m.prio {
			l := m.left
			m.left, l.right = l.right, &m
			return l
		}
	case c > 0:
		m.right = insert(n.right, key, val)
		if m.right.prio > m.prio {
			r := m.right
			m.right, r.left = r.left, &m
			return r
		}
	default:
		m.key, m.val = key, val
	}
	return &m
}

// remove returns the root of the tree n without key, and whether key was
// there (if not, n itself).
func remove(n *node, key []byte) (*node, bool) {
	if n == nil {
		return nil, false
	}
	m := *n
	switch c := bytes.Compare(key, n.key); {
	case c < 0:
		l, ok := remove(n.left, key)
		if !ok {
			return n, false
		}
		m.left = l
	case c > 0:
		r, ok := remove(n.right, key)
		if !ok {
			return n, false
		}
		m.right = r
	default:
		return merge(n.left, n.right), true
	}
	return &m, true
}

// merge returns the root of a tree holding the nodes of a and b, every
// key of a being less than every key of b.
func merge(a, b *node) *node {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		m := *a
		m.right = merge(a.right, b)
		return &m
	default:
		m := *b
		m.left = merge(a, b.left)
		return &m
	}
}

// cursor walks a tree in key order. It holds the nodes still to visit
// whose left (right, if reverse) subtree it has already passed; the next
// node is on top. A tree never changes, so a cursor stays valid however
// the transaction writes: it goes on walking the tree it started on.
type cursor struct {
	stack   []*node
	reverse bool
}

// seek positions c, in the tree rooted at n, on the first key not less
// than from (greater than from, if strict), or for a reverse cursor on
// the last key less than from (not greater, if !strict; with from nil,
// the last key of the tree).
func (c *cursor) seek(n *node, from []byte, strict bool) {
	c.stack = c.stack[:0]
	for n != nil {
		cmp := 1 // how n.key compares with from, in the cursor's order
		if from != nil {
			cmp = bytes.Compare(n.key, from)
			if c.reverse {
				cmp = -cmp
			}
		}
		if cmp > 0 || cmp == 0 && !strict {
			c.stack = append(c.stack, n)
			n = c.toward(n)
		} else {
			n = c.away(n)
		}
	}
}

// toward is the child of n the cursor visits before n (the left one when
// ascending), away the one after.
func (c *cursor) toward(n *node) *node {
	if c.reverse {
		return n.right
	}
	return n.left
}

func (c *cursor) away(n *node) *node {
	if c.reverse {
		return n.left
	}
	return n.right
}

// next returns the node the cursor is on and moves it on, or nil at the
// end.
func (c *cursor) next() *node {
	if len(c.stack) == 0 {
		return nil
	}
	n := c.stack[len(c.stack)-1]
	c.stack = c.stack[:len(c.stack)-1]
	for m := c.away(n); m != nil; m = c.toward(m) {
		c.stack = append(c.stack, m)
	}
	return n
}
