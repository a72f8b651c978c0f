//! Unit tests; every test works on a fake `/sys` + `/proc` tree in a tempdir.

mod fake_tree;

mod decision;
mod plan;
mod setup;
mod size;
mod status;
