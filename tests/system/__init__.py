"""Tests of armd (a package so that test modules in different folders may share names)."""
