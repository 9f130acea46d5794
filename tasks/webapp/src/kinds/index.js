// The task pages, one per study kind: the registry the page looks up an assignment's `kind` in (the annotation
// room's payload names it). A study kind's page registers here with one line; tests/test_kinds_complete.py checks
// that every kind's tasks part names a page registered here (TaskKind.ui_page).
import LikertTask from "./LikertTask.jsx";
import PairwiseTask from "./PairwiseTask.jsx";
import BestWorstTask from "./BestWorstTask.jsx";
import ChatTask from "./ChatTask.jsx";
import AcuteTask from "./AcuteTask.jsx";

export const PAGES = {};
PAGES.likert = LikertTask;
PAGES.pairwise = PairwiseTask;
PAGES.best_worst = BestWorstTask;
PAGES.chat = ChatTask;
PAGES.acute = AcuteTask;
