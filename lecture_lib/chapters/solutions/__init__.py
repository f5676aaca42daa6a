"""The answers to the chapters' exercises, one module per chapter (``ch01_attention.py`` answers notebook 01's):
what a reader writes for an exercise, models included. A chapter module may import its own chapter's answers
(chapter 01 trains exercise 1's model); nothing else in the package imports them.
"""
