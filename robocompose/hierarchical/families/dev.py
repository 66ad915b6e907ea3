"""The dev split: phrasings prompts and few-shot examples may be tuned on."""

from __future__ import annotations

from robocompose.hierarchical.families.build import (
    Spec,
    all_but,
    explicit,
    rebuild,
    refuse,
    sort_all,
    to_bins,
    tower,
)

PHRASINGS: dict[str, tuple[Spec, ...]] = {
    "tower_three": (
        tower("put green on red then blue on green", "red green blue"),
        tower("build a tower: yellow at the bottom, then red, purple on top", "yellow red purple"),
        tower(
            "stack the blocks with blue at the bottom, green in the middle and red on top",
            "blue green red",
        ),
        tower("from top to bottom the tower should be orange, blue, yellow", "yellow blue orange"),
        tower("stack cyan on white on red", "red white cyan"),
        tower(
            "I want a tower that reads, from bottom to top: green, purple, blue",
            "green purple blue",
            extra="yellow",
        ),
        tower(
            "first put the red block on the yellow block, then put the green block on the red "
            "block",
            "yellow red green",
        ),
        tower(
            "make a stack with the purple cube on top, the orange cube in the middle and the cyan "
            "cube at the bottom",
            "cyan orange purple",
        ),
        tower(
            "the blue block goes at the base, the white block on it, and the yellow block at the "
            "very top",
            "blue white yellow",
        ),
        tower(
            "put the green one on the blue one, after putting the blue one on the orange one",
            "orange blue green",
        ),
        tower("red first, yellow on it, blue last", "red yellow blue", extra="green"),
        tower("pile them up: purple at the base, green next, red at the top", "purple green red"),
    ),
    "tower_two": (
        tower("put red on blue", "blue red", extra="green"),
        tower("stack the yellow block on top of the green block", "green yellow", extra="red"),
        tower("place the purple cube onto the orange cube", "orange purple", extra="blue cyan"),
        tower(
            "make a two-block tower with white at the bottom and red on top",
            "white red",
            extra="green",
        ),
        tower("blue goes on yellow", "yellow blue", extra="red"),
        tower("put the green block under the cyan block", "green cyan", extra="purple"),
        tower("set the orange block down on the red block", "red orange", extra="blue"),
        tower("the red one should end up on top of the purple one", "purple red", extra="yellow"),
        tower("stack blue onto white", "white blue", extra="green orange"),
        tower("I need the green block resting on the yellow block", "yellow green", extra="red"),
        tower("pick up the cyan cube and put it on the blue cube", "blue cyan", extra="red"),
        tower("build a short tower: purple below, green above", "purple green", extra="white"),
    ),
    "rebuild": (
        rebuild(
            "take the tower apart and rebuild it with red at the bottom, green in the middle and "
            "blue on top",
            "blue green red",
            "red green blue",
        ),
        rebuild("turn the tower upside down", "yellow purple orange", "orange purple yellow"),
        rebuild(
            "rebuild the stack so that it reads green, blue, red from bottom to top",
            "red green blue",
            "green blue red",
        ),
        rebuild(
            "restack the blocks: white on top, cyan in the middle, yellow at the bottom",
            "cyan white yellow",
            "yellow cyan white",
        ),
        rebuild("reverse the order of the stack", "red blue", "blue red", extra="green"),
        rebuild(
            "unstack everything and build it again as purple, red, green, bottom to top",
            "green red purple",
            "purple red green",
        ),
        rebuild(
            "the tower is wrong: I want blue at the base, then yellow, then orange",
            "orange blue yellow",
            "blue yellow orange",
        ),
        rebuild(
            "change the tower so that the green block is on top of the white block, which is on "
            "the red block",
            "white green red",
            "red white green",
        ),
        rebuild("flip the stack", "cyan purple blue", "blue purple cyan"),
        rebuild(
            "make the middle block the bottom one and keep the other two in the same order above "
            "it",
            "red green blue",
            "green red blue",
        ),
        rebuild(
            "rebuild the tower top to bottom as yellow, red, blue",
            "red yellow blue",
            "blue red yellow",
        ),
        rebuild(
            "put the tower back together with orange at the bottom and green at the top, white "
            "between them",
            "green orange white",
            "orange white green",
        ),
    ),
    "sort_distractor": (
        sort_all("sort the blocks into the bins by colour", "red blue", "red green blue"),
        sort_all(
            "put each block in the bin that matches its colour",
            "yellow green",
            "green purple yellow",
        ),
        sort_all(
            "put every block into the bin of the same color", "orange cyan", "cyan white orange"
        ),
        sort_all(
            "tidy up: each cube goes into its matching coloured bin",
            "purple red",
            "red purple blue",
        ),
        sort_all("match the blocks to the bins by colour", "blue white", "yellow blue white"),
        sort_all("move all the blocks into the bins of their colours", "green", "red green blue"),
        sort_all(
            "place the red block in the red bin and the yellow block in the yellow bin",
            "red yellow",
            "yellow orange red",
        ),
        sort_all("group the blocks by colour into the bins", "cyan purple", "purple green cyan"),
        sort_all(
            "clear the table by dropping each block into the bin of its colour",
            "white green",
            "green white red",
        ),
        sort_all(
            "the bins are colour coded; sort the blocks accordingly",
            "orange blue",
            "blue orange purple",
        ),
        sort_all(
            "first the green block into its bin, then the red one", "red green", "green yellow red"
        ),
        sort_all(
            "could you sort these cubes into the zones of their colours? one bin stays empty",
            "yellow blue",
            "blue cyan yellow",
        ),
    ),
    "named_bins": (
        to_bins(
            "put the red block in the blue bin and the blue block in the green bin",
            "red:blue blue:green",
        ),
        to_bins(
            "yellow block into the purple bin, purple block into the yellow bin",
            "yellow:purple purple:yellow",
        ),
        to_bins("place the green cube in the orange bin", "green:orange", "green orange red"),
        to_bins(
            "move the cyan block to the white bin and the white block to the red bin",
            "cyan:white white:red",
        ),
        to_bins(
            "the blue block goes in the yellow bin, the yellow block in the blue bin",
            "blue:yellow yellow:blue",
        ),
        to_bins(
            "put the red one into the green bin, not the red bin", "red:green", "red green purple"
        ),
        to_bins("green block to the red bin, red block to the purple bin", "green:red red:purple"),
        to_bins(
            "put the white cube in the cyan bin and the cyan cube in the yellow bin",
            "white:cyan cyan:yellow",
        ),
        to_bins(
            "I want the purple block in the blue bin and the orange block in the purple bin",
            "purple:blue orange:purple",
        ),
        to_bins("place the yellow block in the green zone", "yellow:green", "yellow green blue"),
        to_bins(
            "first put the blue block in the red bin, then the red block in the blue bin",
            "blue:red red:blue",
            "red blue green",
        ),
        to_bins(
            "red into the orange bin, orange into the yellow bin, yellow into the red bin",
            "red:orange orange:yellow yellow:red",
        ),
    ),
    "all_but_one": (
        all_but("sort all the blocks by colour except the green one", "red green blue", "green"),
        all_but(
            "put every block in its own bin but leave the yellow block where it is",
            "yellow purple red",
            "yellow",
        ),
        all_but("sort everything except the blue cube", "blue orange cyan", "blue"),
        all_but(
            "put each block in the bin of its colour, apart from the white block",
            "white green red",
            "white",
        ),
        all_but(
            "sort the blocks into matching bins, skipping the red one", "red yellow blue", "red"
        ),
        all_but(
            "all blocks but the purple one go into their matching bins",
            "cyan purple green",
            "purple",
        ),
        all_but(
            "do not move the orange block; sort the others by colour", "orange red blue", "orange"
        ),
        all_but(
            "leave green out and sort the rest into the bins of their colours",
            "green yellow white",
            "green",
        ),
        all_but("sort all blocks except for the cyan block", "red cyan purple", "cyan"),
        all_but(
            "everything into the matching bins, except the blue one which stays on the table",
            "blue yellow green",
            "blue",
        ),
        all_but(
            "put the blocks in their colour bins, all of them except the yellow block",
            "purple yellow orange",
            "yellow",
        ),
        all_but("sort every cube but the red cube", "white red cyan", "red"),
    ),
    "swap": (
        rebuild("swap the red and blue blocks", "red blue", "blue red", extra="green"),
        rebuild(
            "swap the top and bottom blocks of the tower",
            "green yellow purple",
            "purple yellow green",
        ),
        rebuild(
            "exchange the places of the green block and the yellow block",
            "green yellow purple",
            "yellow green purple",
        ),
        explicit(
            "swap the blocks between the two bins",
            "SortBins: red blue / red blue",
            start="in(red, blue) in(blue, red)",
            goal="in(red, red) in(blue, blue)",
        ),
        rebuild("switch orange and cyan in the stack", "white orange cyan", "white cyan orange"),
        explicit(
            "swap the red block and the green block",
            "SortBins: red green / red green blue",
            start="in(red, blue) in(green, green)",
            goal="in(red, green) in(green, blue)",
        ),
        rebuild(
            "the white and blue blocks are the wrong way round; swap them",
            "white blue",
            "blue white",
            extra="red",
        ),
        rebuild(
            "swap the middle block with the one on top", "red purple yellow", "red yellow purple"
        ),
        explicit(
            "trade the bins of the yellow and purple blocks",
            "SortBins: yellow purple / yellow purple green",
            start="in(yellow, green) in(purple, yellow)",
            goal="in(yellow, yellow) in(purple, green)",
        ),
        rebuild("swap green and red", "green red", "red green", extra="blue"),
        rebuild(
            "exchange the bottom block with the middle one", "cyan orange blue", "orange cyan blue"
        ),
        explicit(
            "swap the cyan and white cubes",
            "SortBins: cyan white / cyan white red",
            start="in(cyan, white) in(white, red)",
            goal="in(cyan, red) in(white, white)",
        ),
    ),
    "conditional": (
        explicit(
            "if red is on blue, put green on red; otherwise put green on blue",
            "Stack: red green blue",
            start="on(red, blue)",
            goal="on(green, red) on(red, blue)",
        ),
        explicit(
            "if the yellow block is on the purple block, put the orange block on the yellow one; "
            "otherwise put the orange block on the purple one",
            "Stack: yellow purple orange",
            goal="on(orange, purple)",
        ),
        explicit(
            "if the red block is in the blue bin, move it to the red bin; otherwise put the green "
            "block in the blue bin",
            "SortBins: red green / red green blue",
            start="in(red, blue)",
            goal="in(red, red)",
        ),
        explicit(
            "if the green block is in the green bin, put the blue block in the blue bin; if not, "
            "put the green block in the green bin",
            "SortBins: green blue / green blue red",
            goal="in(green, green)",
        ),
        explicit(
            "when the white block is on the cyan block, stack the red block on the white block; "
            "else stack the red block on the cyan block",
            "Stack: cyan white red",
            start="on(white, cyan)",
            goal="on(red, white) on(white, cyan)",
        ),
        explicit(
            "if blue is on the table, put yellow on blue, otherwise put yellow on green",
            "Stack: blue yellow green",
            goal="on(yellow, blue)",
        ),
        explicit(
            "if the blue block rests on the table, put the purple block on it; otherwise put the "
            "purple block on the blue block",
            "Stack: blue green purple",
            start="on(blue, green)",
            goal="on(purple, blue)",
        ),
        explicit(
            "if the orange block is in the yellow bin, put it in the orange bin, otherwise put it "
            "in the yellow bin",
            "SortBins: orange / orange yellow red",
            goal="in(orange, yellow)",
        ),
        explicit(
            "if the cyan block sits on the green block, put it on the table; otherwise put the "
            "cyan block on the green block",
            "Stack: cyan green white",
            start="on(cyan, green)",
            goal="on_table(cyan)",
        ),
        explicit(
            "in case red is already on yellow, put blue on red; otherwise put red on yellow",
            "Stack: red yellow blue",
            goal="on(red, yellow)",
        ),
        explicit(
            "if the purple block is in the red bin, move it to the purple bin; otherwise move the "
            "red block to the purple bin",
            "SortBins: purple red / purple red",
            start="in(purple, red)",
            goal="in(purple, purple)",
        ),
        explicit(
            "should the green block be on the blue block, put the red block on the green block; if "
            "it is not, put the green block on the blue block",
            "Stack: green blue red",
            goal="on(green, blue)",
        ),
    ),
    "infeasible": (
        refuse("put the purple block on the red block", "Stack: red green blue", "missing_object"),
        refuse("put red on red", "Stack: red green blue", "same_object"),
        refuse(
            "put the blue block on the green block and the green block on the blue block",
            "Stack: red green blue",
            "contradiction",
        ),
        refuse("stack two of the blocks", "Stack: red green blue", "ambiguous"),
        refuse(
            "put the red block in the yellow bin", "SortBins: red blue / red blue", "missing_object"
        ),
        refuse(
            "build a tower with the yellow block on top", "Stack: yellow green blue", "ambiguous"
        ),
        refuse("throw the green block off the table", "Stack: red green blue", "unsafe"),
        refuse(
            "put the orange block in the orange bin and in the blue bin",
            "SortBins: orange blue / orange blue",
            "contradiction",
        ),
        refuse("put the cyan block on top of itself", "Stack: cyan white red", "same_object"),
        refuse("put the red block under the table", "Stack: red green blue", "unreachable"),
        refuse("put the blue block in the bin", "SortBins: blue red / blue red green", "ambiguous"),
        refuse(
            "stack the green block on the white block", "Stack: red green blue", "missing_object"
        ),
        refuse(
            "put the yellow block on the red block and the blue block on the red block",
            "Stack: red yellow blue",
            "contradiction",
        ),
        refuse(
            "smash the tower as hard as you can",
            "Stack: red green blue",
            "unsafe",
            start="on(green, red) on(blue, green)",
        ),
    ),
}
